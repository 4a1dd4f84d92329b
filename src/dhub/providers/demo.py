"""The demo model: what answers, offline and clearly labelled, for a model provider the server
has no configuration for, when the demo model is on (``DHUB_DEMO_MODEL``, docs/providers.md).

It is a ``FunctionModel`` (the project's test model) scripted for the examples, so a new user
sees each example run end to end before setting a key:

- an agent with ``lookup_order`` and ``issue_refund`` tools (examples/support_assistant.yaml)
  looks the order named in the message up, asks to refund it through the actor when the
  message asks for a refund (the run waits for a person's confirmation), then answers from
  the results;
- a request for an alert's headline (examples/incident_summarizer.json) gets a one-line
  summary of the alert's JSON;
- the built-in agents (dhub/builtins/): the summarizer's request (a ``<text>`` block to
  summarize in "at most N words") gets the text's opening sentences, an extractive summary;
  the classifier's (a structured answer whose ``label`` is one of an ``enum``) gets the label
  whose words the text mentions most, its reason saying that this is a keyword match by the
  demo model; the extractor's (any other structured answer) is refused, saying what to
  configure, as made-up data would be worse than none;
- anything else gets an honest "I am the demo model" reply saying what to configure.

It never pretends to be a real model: every answer it gives is marked ``"model": "demo"`` in
its usage (runtime/model.py), which the CLI and the console show.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

from dhub.providers.demo_knowledge import (
    KEY,
    ONTOLOGY_TOOLS,
    TABLE_TOOLS,
    json_object,
    last_turn,
    ontology_turn,
    table_turn,
    tool_results,
)
from dhub.providers.errors import ProviderError
from dhub.providers.testing import FunctionModel, Reply, ReplyLike
from dhub.providers.types import Message, ModelRequest

NAME = "demo"
_METRICS = ("disk", "cpu", "memory", "mem", "load", "latency", "errors")
_HOST_KEYS = ("host", "hostname", "server", "service", "instance", "node", "name")


class DemoModel(FunctionModel):
    """The demo model standing in for the provider ``provider``; ``configure`` says how to
    configure a real one (e.g. "set DHUB_OPENAI_API_KEY")."""

    def __init__(self, provider: str, configure: str) -> None:
        super().__init__(self._answer, name=NAME)
        self.provider = provider
        self.configure = configure

    def _answer(self, request: ModelRequest) -> ReplyLike:
        asked = _last_user(request.messages)
        labels = _labels(request.response_schema)
        if labels is not None:
            error = functools.partial(self._error, request.model)
            return classify(_text_block(asked) or asked, labels, self._setup(), error)
        if request.response_schema is not None:
            return ProviderError(
                "unsupported",
                f"the demo model (answering for model provider '{self.provider}', which is "
                f"not configured) writes no structured output: {self.configure}",
                provider=NAME,
                model=request.model,
            )
        tools = {t.name: t for t in request.tools}
        if tools.keys() >= ONTOLOGY_TOOLS and _about_an_object(asked, tools.keys()):
            return ontology_turn(request.messages, tools, self._note())
        if {"lookup_order", "issue_refund"} <= tools.keys():
            return support_turn(request.messages, self._intro())
        if tools.keys() >= TABLE_TOOLS:
            return table_turn(request.messages, tools, self._note())
        if "headline" in f"{request.system} {asked}".lower() and "{" in asked:
            return headline(asked)
        text = _text_block(asked)
        if text is not None and "summar" in f"{request.system} {asked}".lower():
            return lead_summary(text, _max_words(asked))
        return (
            f"{self._intro()} It answers offline so that you can try dhub; it does not "
            f"understand your message. {self._setup()}"
        )

    def _intro(self) -> str:
        return (
            f"I am the demo model: this server has no model provider '{self.provider}' "
            "configured, so dhub answers with a scripted stand-in instead of a real LLM."
        )

    def _note(self) -> str:
        return (
            "(This is the demo model: it read your question by keyword matching and let the "
            f"tools compute the answer; it does not understand it. {self._setup()})"
        )

    def _setup(self) -> str:
        return f"For real answers, {self.configure} and restart the server."

    def _error(self, model: str, why: str) -> ProviderError:
        return ProviderError(
            "unsupported",
            f"the demo model (answering for model provider '{self.provider}', which is not "
            f"configured) {why}: {self.configure}",
            provider=NAME,
            model=model,
        )


# -- the support example --------------------------------------------------------------------


def _about_an_object(asked: str, tools: Iterable[str]) -> bool:
    """Whether a question is for the ontology: it names a key, and is not a refund that the
    support example's actor makes."""
    refund = "issue_refund" in tools and "refund" in asked.lower()
    return KEY.search(asked) is not None and not refund


def support_turn(messages: tuple[Message, ...], intro: str) -> ReplyLike:
    """The support assistant's turn, from the transcript since the customer's last message:
    look the order up, ask to refund it (needs confirmation), then answer."""
    asked, turn = last_turn(messages)
    order_id = _order_id(asked)
    results = {name: found[-1] for name, found in tool_results(turn).items()}
    if order_id is None:
        return (
            f"{intro} In this demo I can look an order up and refund it: name the order, "
            "for example 'Please refund order A-1001'."
        )
    step = len(turn)  # distinct call ids across the turn's iterations
    if "lookup_order" not in results:
        return Reply(tool_calls=[{"id": f"demo_lookup_{step}", "name": "lookup_order",
                                  "arguments": {"order_id": order_id}}])  # fmt: skip
    found, failed = results["lookup_order"]
    order = json_object(found)
    if failed or order is None:
        return f"I could not look order {order_id} up: {found}"
    status = order.get("status", "unknown")
    amount = order.get("amount")
    if "refund" not in asked.lower():
        return f"Order {order_id} is {status}; its amount is {amount}."
    if "issue_refund" not in results:
        arguments = {"order_id": order_id, "amount": amount}
        return Reply(
            f"Order {order_id} is {status}. I am asking to refund {amount}.",
            tool_calls=[{"id": f"demo_refund_{step}", "name": "issue_refund",
                         "arguments": arguments}],
        )  # fmt: skip
    outcome, refused = results["issue_refund"]
    if refused:
        return f"I did not refund order {order_id}. {outcome}"
    refunded = (json_object(outcome) or {}).get("refunded", amount)
    return f"Done: order {order_id} is refunded ({refunded})."


def _order_id(text: str) -> str | None:
    found = KEY.search(text)
    return found.group(0) if found else None


# -- the summarizer example -----------------------------------------------------------------


def headline(prompt: str) -> str:
    """A one-line headline for the JSON object in ``prompt``."""
    start, end = prompt.find("{"), prompt.rfind("}")
    alert = json_object(prompt[start : end + 1]) if 0 <= start < end else None
    alert = alert or {}
    host = next((str(alert[k]) for k in _HOST_KEYS if k in alert), "")
    where = f" on {host}" if host else ""
    for key in _METRICS:
        value = alert.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            unit = "%" if key in ("disk", "cpu", "memory", "mem") else ""
            return f"{key.capitalize()} at {value:g}{unit}{where}"
    rest = ", ".join(f"{k} {v}" for k, v in alert.items() if k not in _HOST_KEYS)
    return f"Alert{where}: {rest}" if rest else f"Alert{where}"


def _last_user(messages: tuple[Message, ...]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


# -- the built-in agents (dhub/builtins/) --------------------------------------------------------

_TEXT_BLOCK = re.compile(r"<text>\n(.*?)\n</text>", re.DOTALL)  # on lines of their own
_AT_MOST = re.compile(r"at most (\d+) words")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TOKEN = re.compile(r"[^\W_]+")
_FALLBACK_LABELS = ("other", "others", "unknown", "none", "misc", "miscellaneous", "unclear")


def _text_block(prompt: str) -> str | None:
    """The text between ``<text>`` and ``</text>``, each on a line of its own (the built-ins
    put their input there)."""
    found = _TEXT_BLOCK.search(prompt)
    return found.group(1).strip() if found else None


def _max_words(prompt: str) -> int:
    found = _AT_MOST.search(prompt)
    return max(1, int(found.group(1))) if found else 80


def lead_summary(text: str, max_words: int) -> str:
    """The text's opening sentences, as many as fit in ``max_words`` words (at least the
    first, cut to fit): the extractive summary a demo can honestly make."""
    taken: list[str] = []
    count = 0
    for sentence in _SENTENCE_END.split(" ".join(text.split())):
        words = sentence.split()
        if count + len(words) > max_words:
            if not taken:
                return " ".join(words[:max_words]) + "…"
            break
        taken.append(sentence)
        count += len(words)
    return " ".join(taken)


def _labels(schema: Any) -> list[str] | None:
    """The labels of a classifier's response schema: an object with a ``label`` among an
    ``enum`` of strings and a ``reason``; None for any other schema."""
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or set(properties) != {"label", "reason"}:
        return None
    label = properties["label"]
    enum = label.get("enum") if isinstance(label, dict) else None
    if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
        return None
    return enum


def _same_word(word: str, token: str) -> bool:
    """A label's word and a word of the text, loosely: "bug" is in "bugs", "billing" in
    "billed" (a shared start of two thirds of the shorter word, three letters at least)."""
    if len(word) < 3:
        return token == word
    shorter = min(len(word), len(token))
    shared = next((i for i in range(shorter) if word[i] != token[i]), shorter)
    return shared >= max(3, shorter * 2 // 3)


def classify(
    text: str, labels: list[str], setup: str, error: Callable[[str], ProviderError]
) -> ReplyLike:
    """The label whose words the text mentions most, and why, said as a keyword match; a
    fallback label ("other", ...) when none is mentioned; else an error saying to configure a
    real model."""
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    scores: list[tuple[int, list[str], str]] = []
    for label in labels:
        words = [w.lower() for w in _TOKEN.findall(label)]
        hits = [t for t in tokens if any(_same_word(w, t) for w in words)]
        scores.append((len(hits), hits, label))
    best = max(scores, key=lambda s: s[0], default=(0, [], ""))
    note = "This is the demo model's keyword match, not a model's judgement. " + setup
    if best[0] == 0:
        fallback = next((lb for lb in labels if lb.lower() in _FALLBACK_LABELS), None)
        if fallback is None:
            return error("classifies by the labels' words only, and the text mentions none of them")
        return {"label": fallback, "reason": f"The text mentions none of the other labels. {note}"}
    mentioned = ", ".join(f"'{w}'" for w in dict.fromkeys(best[1]))
    tied = [s[2] for s in scores if s[0] == best[0] and s[2] != best[2]]
    also = f"; as often as {', '.join(repr(t) for t in tied)}, the first is taken" if tied else ""
    reason = f"The text mentions {mentioned} (the label '{best[2]}'{also}). {note}"
    return {"label": best[2], "reason": reason}
