"""The demo model's script (dhub.providers.demo), through the same client as a real provider:
what it asks and answers at each point of the support example's turn, the summarizer's
headline, the built-in agents' answers, and the honest reply to anything else."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dhub.providers.client import ModelClient
from dhub.providers.demo import DemoModel
from dhub.providers.errors import ProviderError
from dhub.providers.registry import Providers
from dhub.providers.types import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec

SUPPORT_TOOLS = (ToolSpec("lookup_order", "Look an order up", {"type": "object"}),
                 ToolSpec("issue_refund", "Refund an order", {"type": "object"}))  # fmt: skip
ORDER = {"order_id": "A-1001", "status": "shipped", "amount": 42.0}


def ask(messages: list[Message], **request: Any) -> ModelResponse:
    providers = Providers()
    providers.enable_demo()
    client: ModelClient = providers.client("openai", "gpt-4o-mini")
    return asyncio.run(client.complete(ModelRequest("gpt-4o-mini", tuple(messages), **request)))


def called(name: str, arguments: dict[str, Any], call_id: str) -> Message:
    return Message("assistant", tool_calls=(ToolCall(call_id, name, arguments),))


def result(call_id: str, value: Any, is_error: bool = False) -> Message:
    text = value if isinstance(value, str) else json.dumps(value)
    return Message("tool", text, tool_call_id=call_id, is_error=is_error)


def test_a_refund_is_looked_up_then_asked_for_then_answered() -> None:
    asked = Message("user", "Please refund order A-1001")
    first = ask([asked], tools=SUPPORT_TOOLS).message
    [lookup] = first.tool_calls
    assert (lookup.name, lookup.arguments) == ("lookup_order", {"order_id": "A-1001"})
    looked = [asked, called("lookup_order", lookup.arguments, lookup.id), result(lookup.id, ORDER)]
    second = ask(looked, tools=SUPPORT_TOOLS).message
    [refund] = second.tool_calls
    assert (refund.name, refund.arguments) == ("issue_refund",
                                               {"order_id": "A-1001", "amount": 42.0})  # fmt: skip
    assert refund.id != lookup.id
    refunded = [*looked, called("issue_refund", refund.arguments, refund.id),
                result(refund.id, {"order_id": "A-1001", "refunded": 40.0})]  # fmt: skip
    assert ask(refunded, tools=SUPPORT_TOOLS).message.content == (
        "Done: order A-1001 is refunded (40.0)."
    )
    rejected = [*looked, called("issue_refund", refund.arguments, refund.id),
                result(refund.id, "ana rejected this call: no. It did not run.", True)]  # fmt: skip
    assert ask(rejected, tools=SUPPORT_TOOLS).message.content == (
        "I did not refund order A-1001. ana rejected this call: no. It did not run."
    )


def test_a_question_without_refund_gets_the_status_and_no_refund_call() -> None:
    asked = Message("user", "Where is my order B-77?")
    [lookup] = ask([asked], tools=SUPPORT_TOOLS).message.tool_calls
    order = {"order_id": "B-77", "status": "packed", "amount": 9.5}
    turn = [asked, called("lookup_order", lookup.arguments, lookup.id), result(lookup.id, order)]
    answer = ask(turn, tools=SUPPORT_TOOLS).message
    assert answer.content == "Order B-77 is packed; its amount is 9.5." and not answer.tool_calls


def test_only_the_last_turn_counts_and_a_message_without_an_order_asks_for_one() -> None:
    earlier = [Message("user", "Please refund order A-1001"),
               Message("assistant", "Done: order A-1001 is refunded (42.0).")]  # fmt: skip
    answer = ask([*earlier, Message("user", "thanks!")], tools=SUPPORT_TOOLS).message
    assert not answer.tool_calls
    assert answer.content.startswith("I am the demo model")
    assert "for example 'Please refund order A-1001'" in answer.content


def test_a_failed_lookup_is_said_as_it_is() -> None:
    asked = Message("user", "Refund A-1001")
    [lookup] = ask([asked], tools=SUPPORT_TOOLS).message.tool_calls
    turn = [asked, called("lookup_order", lookup.arguments, lookup.id),
            result(lookup.id, "Error (timeout): too slow", True)]  # fmt: skip
    answer = ask(turn, tools=SUPPORT_TOOLS).message
    assert answer.content == "I could not look order A-1001 up: Error (timeout): too slow"


@pytest.mark.parametrize(
    ("alert", "headline"),
    [({"host": "db-1", "disk": 97}, "Disk at 97% on db-1"),
     ({"service": "api", "latency": 850.5}, "Latency at 850.5 on api"),
     ({"host": "web-2", "status": "down"}, "Alert on web-2: status down"),
     ({}, "Alert")],
)  # fmt: skip
def test_an_alert_gets_a_headline(alert: dict[str, Any], headline: str) -> None:
    prompt = f"Write a one-line headline for this alert: {json.dumps(alert)}"
    answer = ask([Message("user", prompt)], system="You write terse incident headlines.")
    assert answer.message.content == headline
    assert answer.usage.estimated  # the demo model reports no usage: dhub counts it


def test_anything_else_is_told_what_answers_and_what_to_set() -> None:
    answer = ask([Message("user", "What is 2 + 2?")]).message.content
    assert answer == (
        "I am the demo model: this server has no model provider 'openai' configured, so dhub "
        "answers with a scripted stand-in instead of a real LLM. It answers offline so that "
        "you can try dhub; it does not understand your message. For real answers, set "
        "DHUB_OPENAI_API_KEY and restart the server."
    )


def test_structured_output_is_refused_not_made_up() -> None:
    with pytest.raises(ProviderError) as refused:
        ask([Message("user", "Summarize")], response_schema={"type": "object"})
    assert refused.value.kind == "unsupported"
    assert "set DHUB_OPENAI_API_KEY" in refused.value.message


def test_it_answers_only_for_names_not_configured() -> None:
    providers = Providers()
    providers.add(DemoModel("x", "y"))  # any provider registered under a name: not the demo
    providers.enable_demo()
    assert providers.is_demo("openai") and not providers.is_demo("demo")
    assert providers.resolve("demo")["configured"] is True
    assert Providers().resolve("openai")["type"] is None  # off: nothing answers


# -- the built-in agents (dhub/builtins/) --------------------------------------------------------

ARTICLE = (
    "The db-1 server ran out of disk at 03:00. Nightly backups failed as a result. The team "
    "added a volume and the backups resumed. No data was lost."
)


def summarize(text: str, words: int) -> str:
    prompt = (f"Summarize the text between <text> and </text> in at most {words} words.\n\n"
              f"<text>\n{text}\n</text>")  # fmt: skip
    return ask([Message("user", prompt)], system="You summarize texts faithfully.").message.content


def test_the_summarizer_gets_the_opening_sentences_that_fit() -> None:
    assert summarize(ARTICLE, 20) == (
        "The db-1 server ran out of disk at 03:00. Nightly backups failed as a result."
    )
    assert summarize(ARTICLE, 100) == ARTICLE
    assert summarize("one two three four five six", 3) == "one two three…"


def labels_schema(labels: list[str]) -> dict[str, Any]:
    """The classifier's response schema (dhub/builtins/classifier.yaml) for these labels."""
    return {
        "type": "object", "additionalProperties": False, "required": ["label", "reason"],
        "properties": {"label": {"type": "string", "enum": labels}, "reason": {"type": "string"}},
    }  # fmt: skip


def classify(text: str, labels: list[str]) -> dict[str, Any]:
    prompt = f"Labels: {json.dumps(labels)}\nClassify the text.\n\n<text>\n{text}\n</text>"
    answer = ask([Message("user", prompt)], response_schema=labels_schema(labels))
    parsed: dict[str, Any] = answer.parsed
    return parsed


def test_the_classifier_gets_the_label_the_text_mentions_most_said_as_a_keyword_match() -> None:
    found = classify("I was billed twice; the bill is wrong", ["bug", "billing", "other"])
    assert found["label"] == "billing"
    assert found["reason"].startswith("The text mentions 'billed', 'bill' (the label 'billing')")
    assert "demo model's keyword match" in found["reason"]
    assert found["reason"].endswith("set DHUB_OPENAI_API_KEY and restart the server.")
    # The labels' words are read loosely ("bugs" is "bug"), case aside.
    assert classify("Bugs everywhere", ["Bug report", "billing"])["label"] == "Bug report"


def test_a_text_naming_no_label_gets_the_fallback_label_or_an_error() -> None:
    assert classify("Hello there", ["billing", "Other"])["label"] == "Other"
    with pytest.raises(ProviderError) as refused:
        classify("Hello there", ["billing", "bug"])
    assert refused.value.kind == "unsupported"
    assert "mentions none of them" in refused.value.message
    assert "set DHUB_OPENAI_API_KEY" in refused.value.message


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(max_size=200),
    labels=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=6, unique=True),
)
def test_a_classification_is_always_one_of_the_labels_or_an_honest_refusal(
    text: str, labels: list[str]
) -> None:
    """Whatever the text and labels: a label among them (the client checked it against the
    schema), or the refusal saying what to configure; never anything else."""
    outcome: dict[str, Any] | ProviderError
    try:
        outcome = classify(text, labels)
    except ProviderError as refused:
        outcome = refused
    if isinstance(outcome, ProviderError):
        assert outcome.kind == "unsupported" and "DHUB_OPENAI_API_KEY" in outcome.message
    else:
        assert outcome["label"] in labels and "keyword match" in outcome["reason"]
