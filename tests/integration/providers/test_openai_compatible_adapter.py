"""``OpenAIAdapter(compatible=True)``: an OpenAI-compatible server (Ollama, vLLM, llama.cpp,
LM Studio) by base URL, through the real ``openai`` SDK against the fake server at
``/compat/v1`` (no API key)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from dhub.providers.catalog import ModelInfo, configured, family_default
from dhub.providers.errors import UnsupportedFeature
from dhub.providers.openai import OpenAIAdapter
from dhub.providers.types import Effort, Message, ReasoningDelta, TextDelta, ToolCall, Usage
from tests.integration.providers.test_openai_adapter import (
    ABSENT,
    REFUSED,
    STRICT_SCHEMA,
    WEATHER,
    ask,
    collect,
    effort_cases,
    failure,
    fragments,
    reasonings,
    texts,
)
from tests.support.wire import JSONReply, OpenAIReply, OpenAIServer, SSEEvent, SSEReply
from tests.support.wire import ToolCall as WireCall
from tests.support.wire import openai_wire as ow

LOCAL = "llama3.1:8b"
THINKER = "qwen3:8b"  # configured in the providers file as a reasoning model


def local_models(provider: str = "local") -> Callable[[str], ModelInfo]:
    """A compatible entry's catalog: family defaults, one model configured to reason, one
    configured (wrongly, for a compatible server) to use the Responses API."""

    def lookup(model: str) -> ModelInfo:
        base = family_default("openai_compatible", provider, model)
        if model == THINKER:
            return configured(provider, model, base, {"reasoning": "effort",
                                                      "efforts": ["low", "medium", "high"]})  # fmt: skip  # noqa: E501
        if model == "responses-model":
            return configured(provider, model, base, {"api": "responses"})
        return base

    return lookup


@pytest.fixture
async def adapter(openai_compatible_server: OpenAIServer) -> AsyncIterator[OpenAIAdapter]:
    adapter = OpenAIAdapter(
        "local", api_key=None, base_url=openai_compatible_server.base_url,
        models=local_models(), timeout=5, compatible=True,
        headers={"x-tenant": "team-a"},
    )  # fmt: skip
    yield adapter
    await adapter.aclose()


async def test_a_stream_from_a_compatible_server(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    server = openai_compatible_server
    server.queue(OpenAIReply("The answer is 4.", reasoning_content=["2 + 2", " = 4"],
                             usage_in_stream="always", usage=ow.Usage(20, 8)))  # fmt: skip
    items, response = await collect(adapter, ask(LOCAL, "2 + 2?", system="Think."))
    assert reasonings(items) == ["2 + 2", " = 4"]
    assert "".join(texts(items)) == "The answer is 4."
    assert items.index(ReasoningDelta(" = 4")) < items.index(TextDelta("The "))
    assert response.message == Message("assistant", "The answer is 4.", reasoning="2 + 2 = 4")
    assert response.usage == Usage(20, 8)
    assert (response.provider, response.model, response.stop_reason) == ("local", LOCAL, "end")
    sent = server.last
    assert sent.path == "/compat/v1/chat/completions"
    assert sent.header("authorization") == "Bearer not-needed"
    assert sent.header("x-tenant") == "team-a"
    assert sent.json["messages"] == [{"role": "system", "content": "Think."},
                                     {"role": "user", "content": "2 + 2?"}]  # fmt: skip


async def test_reasoning_in_the_reasoning_field(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": LOCAL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip

    # Ollama's field; servers moving from reasoning_content send the same text in both.
    openai_compatible_server.queue(SSEReply([
        chunk({"role": "assistant", "reasoning": "hmm, "}),
        chunk({"reasoning": "four", "reasoning_content": "four"}),
        chunk({"content": "4"}),
        chunk({}, "stop"),
        SSEEvent("[DONE]"),
    ]))  # fmt: skip
    items, response = await collect(adapter, ask(LOCAL))
    assert items == [ReasoningDelta("hmm, "), ReasoningDelta("four"), TextDelta("4")]
    assert response.message.reasoning == "hmm, four"
    assert response.usage == Usage()  # none reported: a layer above estimates


async def test_max_tokens_and_no_openai_only_fields(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    openai_compatible_server.queue(OpenAIReply("ok"))
    request = ask(LOCAL, max_output_tokens=64, tools=(WEATHER,), stop=("\n\n",),
                  response_schema=STRICT_SCHEMA, options={"num_ctx": 8192})  # fmt: skip
    await collect(adapter, request)
    body = openai_compatible_server.last.json
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": dict(WEATHER.parameters)}}]  # fmt: skip
    assert body["tool_choice"] == "auto"
    assert body["stop"] == ["\n\n"]
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["num_ctx"] == 8192
    assert body["stream_options"] == {"include_usage": True}


async def test_always_chat_completions_even_if_configured_for_responses(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    openai_compatible_server.queue(OpenAIReply("ok"))
    await collect(adapter, ask("responses-model", stop=("x",)))  # stop is fine on chat
    assert openai_compatible_server.last.path.endswith("/chat/completions")


async def test_tool_calls_from_a_compatible_server(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    openai_compatible_server.queue(OpenAIReply(tool_calls=[
        WireCall("get_weather", {"city": "Paris"}, id="call_a"),
        WireCall("get_weather", {"city": "Rome"}, id="call_b"),
    ]))  # fmt: skip
    _, response = await collect(adapter, ask(LOCAL, tools=(WEATHER,)))
    assert response.message.tool_calls == (
        ToolCall("call_a", "get_weather", {"city": "Paris"}),
        ToolCall("call_b", "get_weather", {"city": "Rome"}),
    )
    assert response.stop_reason == "tool_calls"


async def test_calls_that_reuse_index_0_and_finish_with_stop(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    # Some local servers send each call whole, all at index 0, then finish_reason "stop".
    def call(call_id: str, city: str) -> dict[str, Any]:
        return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": LOCAL,
                "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
                    {"index": 0, "id": call_id, "type": "function",
                     "function": {"name": "get_weather", "arguments": f'{{"city":"{city}"}}'}},
                ]}}]}  # fmt: skip

    done = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": LOCAL,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}  # fmt: skip
    openai_compatible_server.queue(SSEReply([call("c1", "Paris"), call("c2", "Rome"), done,
                                             SSEEvent("[DONE]")]))  # fmt: skip
    items, response = await collect(adapter, ask(LOCAL, tools=(WEATHER,)))
    assert [(f.index, f.id) for f in fragments(items)] == [(0, "c1"), (1, "c2")]
    assert response.message.tool_calls == (
        ToolCall("c1", "get_weather", {"city": "Paris"}),
        ToolCall("c2", "get_weather", {"city": "Rome"}),
    )
    assert response.stop_reason == "tool_calls"


async def test_a_plain_error_body(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    # Ollama answers {"error": "<text>"}; others send plain text.
    openai_compatible_server.queue(
        JSONReply({"error": "model 'llama9' not found, try pulling it first"}, 404),
        JSONReply("upstream connect error", 502, headers={"content-type": "text/plain"}),
    )
    _, error = await failure(adapter, ask("llama9"))
    assert (error.kind, error.status) == ("bad_request", 404)
    assert error.message == "model 'llama9' not found, try pulling it first"
    assert (error.provider, error.model) == ("local", "llama9")
    _, error = await failure(adapter, ask(LOCAL))
    assert (error.kind, error.status, error.message) == ("server_error", 502,
                                                         "upstream connect error")  # fmt: skip


async def test_a_cut_stream(adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer) -> None:
    openai_compatible_server.queue(OpenAIReply("a long local answer", cut_after=3))
    items, error = await failure(adapter, ask(LOCAL))
    assert texts(items) == ["a lo", "ng l"]
    assert error.kind == "stream_cut" and error.provider == "local"


# What the body holds per dhub effort (None, none … max) on a compatible server.
COMPATIBLE_EFFORTS: dict[str, tuple[str, ...]] = {
    LOCAL: (ABSENT, ABSENT, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED, REFUSED),
    THINKER: (ABSENT, "low", "low", "low", "medium", "high", "high", "high"),
}


@pytest.mark.parametrize(("model", "effort", "expected"), effort_cases(COMPATIBLE_EFFORTS))
async def test_reasoning_effort_on_a_compatible_server(
    adapter: OpenAIAdapter,
    openai_compatible_server: OpenAIServer,
    model: str,
    effort: Effort | None,
    expected: str,
) -> None:
    request = ask(model, reasoning_effort=effort)
    if expected == REFUSED:
        with pytest.raises(UnsupportedFeature, match="does not reason"):
            await anext(adapter.stream(request))
        assert openai_compatible_server.requests == []
        return
    openai_compatible_server.queue(OpenAIReply("ok"))
    await collect(adapter, request)
    body = openai_compatible_server.last.json
    assert body.get("reasoning_effort", ABSENT) == expected
    assert "reasoning" not in body and "include" not in body


async def test_unsupported_on_a_modest_local_model(openai_compatible_server: OpenAIServer) -> None:
    base = local_models()

    def models(model: str) -> ModelInfo:
        return dataclasses.replace(base(model), tools=False, structured_output=False)

    adapter = OpenAIAdapter("local", api_key=None, base_url=openai_compatible_server.base_url,
                            models=models, compatible=True)  # fmt: skip
    try:
        for fields in ({"tools": (WEATHER,)}, {"response_schema": STRICT_SCHEMA},
                       {"messages": (Message("user", "?", images=("data:image/png;base64,A",)),)}):  # fmt: skip  # noqa: E501
            request = dataclasses.replace(ask(LOCAL), **fields)
            with pytest.raises(UnsupportedFeature):
                await anext(adapter.stream(request))
        assert openai_compatible_server.requests == []
    finally:
        await adapter.aclose()


async def test_a_rate_limit_carries_retry_after_and_the_client_waits_it(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    from dhub.providers.client import ModelClient, RetryPolicy

    openai_compatible_server.queue(ow.rate_limited(retry_after=0.2), OpenAIReply("ok then"))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    client = ModelClient(adapter, local_models(), RetryPolicy(), sleep=sleep, rng=lambda: 0.0)
    response = await client.complete(ask(LOCAL))
    assert response.message.content == "ok then" and slept == [0.2]
    assert len(openai_compatible_server.requests_to("/chat/completions")) == 2


async def test_split_tool_arguments_usage_and_broken_json(
    adapter: OpenAIAdapter, openai_compatible_server: OpenAIServer
) -> None:
    openai_compatible_server.queue(
        OpenAIReply(tool_calls=[WireCall("get_weather", {"city": "Paris"},
                                         fragments=['{"ci', 'ty": "Pa', 'ris"}'])],
                    usage=ow.Usage(21, 9)),
        OpenAIReply(tool_calls=[WireCall("get_weather", '{"city": "Par')]),
    )  # fmt: skip
    items, response = await collect(adapter, ask(LOCAL, tools=(WEATHER,)))
    assert [f.arguments for f in fragments(items) if f.arguments] == ['{"ci', 'ty": "Pa', 'ris"}']
    assert response.message.tool_calls[0].arguments == {"city": "Paris"}
    assert response.usage == Usage(21, 9)
    _, error = await failure(adapter, ask(LOCAL, tools=(WEATHER,)))
    assert error.kind == "malformed_tool_call" and "get_weather" in error.message
