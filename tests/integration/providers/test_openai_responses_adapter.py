"""``OpenAIAdapter`` on the Responses API (the catalog's reasoning models: o3, gpt-5 …),
through the real ``openai`` SDK against the fake OpenAI server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dhub.providers.errors import UnsupportedFeature
from dhub.providers.openai import OpenAIAdapter
from dhub.providers.types import (
    Message,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from tests.integration.providers.test_openai_adapter import (
    NOT_STRICT_SCHEMA,
    STRICT_SCHEMA,
    TIME,
    WEATHER,
    ask,
    catalog,
    collect,
    failure,
    fragments,
    reasonings,
    texts,
)
from tests.support.wire import OpenAIReply, OpenAIServer, SSEEvent, SSEReply
from tests.support.wire import ToolCall as WireCall
from tests.support.wire import openai_wire as ow

REASONER = "o3"


@pytest.fixture
async def adapter(openai_server: OpenAIServer) -> AsyncIterator[OpenAIAdapter]:
    adapter = OpenAIAdapter(
        "openai", api_key=openai_server.api_key, base_url=openai_server.base_url,
        models=catalog(), timeout=5,
    )  # fmt: skip
    yield adapter
    await adapter.aclose()


def event(type_: str, **data: Any) -> SSEEvent:
    return SSEEvent({"type": type_, "sequence_number": 0, **data}, event=type_)


def response_object(status: str = "in_progress", **fields: Any) -> dict[str, Any]:
    return {
        "id": "resp_1", "object": "response", "created_at": 1, "status": status,
        "model": "o3-2025-04-16", "output": [], "error": None, "incomplete_details": None,
        "instructions": None, "metadata": {}, "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "temperature": 1.0, "top_p": 1.0, "usage": None,
        **fields,
    }  # fmt: skip


async def test_text_and_reasoning_stream_with_replay(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply(["The answer ", "is 4."], reasoning_content=["2 + 2 ", "= 4"],
                                    model="o3-2025-04-16"))  # fmt: skip
    items, response = await collect(adapter, ask(REASONER, "2 + 2?", system="Be brief.",
                                                 reasoning_effort="high"))  # fmt: skip
    assert items == [ReasoningDelta("2 + 2 "), ReasoningDelta("= 4"),
                     TextDelta("The answer "), TextDelta("is 4.")]  # fmt: skip
    message = response.message
    assert (message.content, message.reasoning) == ("The answer is 4.", "2 + 2 = 4")
    [item] = message.replay["openai_responses"]
    assert item["type"] == "reasoning" and item["id"].startswith("rs_")
    assert item["encrypted_content"] == f"enc:{item['id']}:2 + 2 = 4"
    assert item["summary"] == [{"type": "summary_text", "text": "2 + 2 = 4"}]
    assert (response.stop_reason, response.model) == ("end", "o3-2025-04-16")

    sent = openai_server.last
    assert sent.path == "/v1/responses" and sent.stream
    body = sent.json
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text",
                                                           "text": "2 + 2?"}]}]  # fmt: skip
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["store"] is False
    for field in ("messages", "stream_options", "tools", "text", "max_output_tokens"):
        assert field not in body, field


async def test_a_reasoning_model_without_an_effort_still_gets_summaries_and_replay(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("ok"))
    await collect(adapter, ask("gpt-5"))
    body = openai_server.last.json
    assert body["reasoning"] == {"summary": "auto"}  # the model's default effort
    assert body["include"] == ["reasoning.encrypted_content"]


async def test_several_summary_parts_are_separated(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    def delta(part: int, text: str) -> SSEEvent:
        return event("response.reasoning_summary_text.delta", item_id="rs_1", output_index=0,
                     summary_index=part, delta=text)  # fmt: skip

    done = response_object("completed")
    openai_server.queue(SSEReply([
        event("response.created", response=response_object()),
        delta(0, "First."), delta(1, "Second."),
        event("response.completed", response=done),
    ]))  # fmt: skip
    items, response = await collect(adapter, ask(REASONER))
    assert reasonings(items) == ["First.", "\n\nSecond."]
    assert response.message.reasoning == "First.\n\nSecond."
    assert response.usage == Usage()  # the response said none


async def test_tool_call_fragments_and_several_calls(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("Checking.", reasoning_content="need tools", tool_calls=[
        WireCall("get_weather", {"city": "Paris"}, id="call_w",
                 fragments=['{"city"', ': "Paris"}']),
        WireCall("get_time", {"city": "Tokyo"}, id="call_t", fragments=['{"city": "Tokyo"}']),
    ]))  # fmt: skip
    items, response = await collect(adapter, ask(REASONER, tools=(WEATHER, TIME)))
    assert fragments(items) == [
        ToolCallDelta(0, "call_w", "get_weather", ""),
        ToolCallDelta(0, None, None, '{"city"'),
        ToolCallDelta(0, None, None, ': "Paris"}'),
        ToolCallDelta(1, "call_t", "get_time", ""),
        ToolCallDelta(1, None, None, '{"city": "Tokyo"}'),
    ]
    assert response.message.tool_calls == (
        ToolCall("call_w", "get_weather", {"city": "Paris"}),
        ToolCall("call_t", "get_time", {"city": "Tokyo"}),
    )
    assert response.stop_reason == "tool_calls"
    assert response.message.content == "Checking."
    body = openai_server.last.json
    assert body["tools"] == [
        {"type": "function", "name": "get_weather", "description": "Current weather for a city.",
         "parameters": dict(WEATHER.parameters), "strict": False},
        {"type": "function", "name": "get_time", "description": "Local time in a city.",
         "parameters": dict(TIME.parameters), "strict": True},
    ]  # fmt: skip
    assert body["tool_choice"] == "auto"


async def test_arguments_sent_whole_with_the_item(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    # A server that sends no argument deltas: the arguments come with the finished item.
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather",
            "arguments": '{"city":"Oslo"}', "status": "completed"}  # fmt: skip
    openai_server.queue(SSEReply([
        event("response.output_item.added", output_index=0, item={**call, "arguments": ""}),
        event("response.output_item.done", output_index=0, item=call),
        event("response.completed", response=response_object("completed", output=[call])),
    ]))  # fmt: skip
    items, response = await collect(adapter, ask(REASONER, tools=(WEATHER,)))
    assert fragments(items) == [ToolCallDelta(0, "call_1", "get_weather", ""),
                                ToolCallDelta(0, None, None, '{"city":"Oslo"}')]  # fmt: skip
    assert response.message.tool_calls == (ToolCall("call_1", "get_weather", {"city": "Oslo"}),)


async def test_replay_round_trip(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    openai_server.queue(
        OpenAIReply(reasoning_content="Paris: use the tool", tool_calls=[
            WireCall("get_weather", {"city": "Paris"}, id="call_1")]),
        OpenAIReply("Sunny."),
    )  # fmt: skip
    first = ask(REASONER, "Weather in Paris?", tools=(WEATHER,), reasoning_effort="low")
    _, turn = await collect(adapter, first)
    assert turn.message.content == "" and turn.stop_reason == "tool_calls"
    history = (
        *first.messages,
        turn.message,
        Message("tool", "sunny", tool_call_id="call_1"),
        Message("assistant", "Anything else?"),
        Message("user", "No, thanks. Try Atlantis.", images=("https://example.test/map.png",)),
        Message("assistant", tool_calls=(ToolCall("call_2", "get_weather", {"city": "X"}),)),
        Message("tool", "no such city", tool_call_id="call_2", is_error=True),
    )
    await collect(adapter, ModelRequest(REASONER, history, tools=(WEATHER,)))
    [reasoning] = turn.message.replay["openai_responses"]
    assert openai_server.last.json["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        reasoning,  # sent back as it came, encrypted content included, before its call
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"role": "assistant", "content": "Anything else?"},
        {"role": "user", "content": [
            {"type": "input_text", "text": "No, thanks. Try Atlantis."},
            {"type": "input_image", "image_url": "https://example.test/map.png",
             "detail": "auto"}]},
        {"type": "function_call", "call_id": "call_2", "name": "get_weather",
         "arguments": '{"city":"X"}'},
        {"type": "function_call_output", "call_id": "call_2", "output": "Error: no such city"},
    ]  # fmt: skip
    assert reasoning["encrypted_content"].endswith(":Paris: use the tool")


async def test_usage_with_cached_and_reasoning_tokens(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    usage = ow.Usage(prompt_tokens=900, completion_tokens=300, cached_tokens=512,
                     reasoning_tokens=256)  # fmt: skip
    openai_server.queue(OpenAIReply("ok", usage=usage), OpenAIReply("ok", usage=None))
    _, response = await collect(adapter, ask(REASONER))
    assert response.usage == Usage(900, 300, reasoning_tokens=256, cached_tokens=512)
    _, response = await collect(adapter, ask(REASONER))
    assert response.usage == Usage()


async def test_incomplete_at_max_output_tokens(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply("Once upon a", finish_reason="length"))
    items, response = await collect(adapter, ask(REASONER, max_output_tokens=3))
    assert "".join(texts(items)) == "Once upon a"
    assert response.stop_reason == "max_tokens"
    assert openai_server.last.json["max_output_tokens"] == 3


async def test_a_refusal(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    openai_server.queue(SSEReply([
        event("response.refusal.delta", item_id="msg_1", output_index=0, content_index=0,
              delta="I can't."),
        event("response.completed", response=response_object("completed")),
    ]))  # fmt: skip
    _, response = await collect(adapter, ask(REASONER))
    assert (response.message.content, response.stop_reason) == ("I can't.", "refusal")


@pytest.mark.parametrize(("schema", "strict"), [(STRICT_SCHEMA, True), (NOT_STRICT_SCHEMA, False)])
async def test_structured_output_format(
    adapter: OpenAIAdapter, openai_server: OpenAIServer, schema: dict[str, Any], strict: bool
) -> None:
    openai_server.queue(OpenAIReply(json={"city": "Paris", "days": []}))
    _, response = await collect(adapter, ask(REASONER, response_schema=schema))
    assert openai_server.last.json["text"] == {"format": {
        "type": "json_schema", "name": "response", "schema": schema, "strict": strict}}  # fmt: skip
    assert response.message.content == '{"city": "Paris", "days": []}'


async def test_a_named_tool_choice(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    openai_server.queue(OpenAIReply("ok"))
    await collect(adapter, ask(REASONER, tools=(WEATHER, TIME), tool_choice="get_time",
                               options={"truncation": "auto"}))  # fmt: skip
    body = openai_server.last.json
    assert body["tool_choice"] == {"type": "function", "name": "get_time"}
    assert body["truncation"] == "auto"


async def test_stop_sequences_are_refused_before_sending(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    with pytest.raises(UnsupportedFeature, match="stop") as raised:
        await anext(adapter.stream(ask(REASONER, stop=("END",))))
    assert raised.value.model == REASONER
    assert openai_server.requests == []


async def test_rate_limited(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    openai_server.queue(ow.rate_limited(retry_after=2))
    items, error = await failure(adapter, ask(REASONER))
    assert items == []
    assert (error.kind, error.status, error.retry_after) == ("rate_limited", 429, 2.0)
    assert openai_server.last.path == "/v1/responses"


async def test_a_stream_cut_in_the_middle(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    # created, in_progress, item added, part added, then 2 text deltas
    openai_server.queue(OpenAIReply("The weather is fine.", cut_after=6))
    items, error = await failure(adapter, ask(REASONER))
    assert texts(items) == ["The ", "weat"]
    assert error.kind == "stream_cut"


async def test_a_stream_that_ends_without_completing(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(SSEReply([
        event("response.created", response=response_object()),
        event("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0,
              delta="half", logprobs=[]),
    ]), SSEReply([event("response.created", response=response_object())]))  # fmt: skip
    items, error = await failure(adapter, ask(REASONER))
    assert texts(items) == ["half"]
    assert error.kind == "stream_cut" and "response.completed" in error.message
    items, error = await failure(adapter, ask(REASONER))
    assert items == [] and error.kind == "connection"


async def test_error_events(adapter: OpenAIAdapter, openai_server: OpenAIServer) -> None:
    error = {"code": "server_error", "message": "The model failed to answer."}
    failed = response_object("failed", error=error)
    openai_server.queue(
        SSEReply([event("response.created", response=response_object()),
                  event("response.failed", response=failed)]),
        SSEReply([event("error", code="rate_limit_exceeded", message="Slow down.", param=None)]),
        SSEReply([event("response.output_text.delta", item_id="m", output_index=0,
                        content_index=0, delta="Hi", logprobs=[]),
                  event("error", code="invalid_prompt", message="Bad prompt.", param=None)]),
        OpenAIReply("Partial", error_after=5),
    )  # fmt: skip
    _, error = await failure(adapter, ask(REASONER))
    assert (error.kind, error.message) == ("server_error", "The model failed to answer.")
    _, error = await failure(adapter, ask(REASONER))
    assert (error.kind, error.message) == ("rate_limited", "Slow down.")
    items, error = await failure(adapter, ask(REASONER))
    assert texts(items) == ["Hi"]
    assert (error.kind, error.message) == ("provider_error", "Bad prompt.")  # not retried anyway
    items, error = await failure(adapter, ask(REASONER))
    assert texts(items) == ["Part"]
    assert error.kind == "stream_cut" and "error while processing" in error.message


async def test_malformed_tool_arguments(
    adapter: OpenAIAdapter, openai_server: OpenAIServer
) -> None:
    openai_server.queue(OpenAIReply(tool_calls=[WireCall("get_time", "[1, 2]", id="call_x")]))
    _, error = await failure(adapter, ask(REASONER, tools=(TIME,)))
    assert error.kind == "malformed_tool_call"
    assert "get_time" in error.message and "not an object" in error.message
