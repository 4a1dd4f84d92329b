"""The model client: retries, timeout, structured output, usage, cancellation — through test
models (honest fakes of a provider), so every path is driven exactly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dhub.providers.catalog import ModelInfo
from dhub.providers.client import ModelClient, RetryPolicy
from dhub.providers.errors import ProviderError, UnsupportedFeature
from dhub.providers.testing import FunctionModel, Reply, ScriptedModel
from dhub.providers.types import (
    Finished,
    Message,
    ModelRequest,
    StreamItem,
    TextDelta,
    Usage,
)

INFO = ModelInfo("test", "m", 8_000, 1_000)
ASK = ModelRequest("m", (Message("user", "Say something about the weather today, please."),))


def client(provider: Any, policy: RetryPolicy | None = None) -> tuple[ModelClient, list[float]]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    made = ModelClient(provider, lambda _: INFO, policy or RetryPolicy(), sleep=sleep,
                       rng=lambda: 0.5)  # fmt: skip
    return made, slept


def failure(kind: str, retry_after: float | None = None, status: int | None = 429) -> ProviderError:
    return ProviderError(kind, "slow down", provider="test", model="m", status=status,  # type: ignore[arg-type]
                         retry_after=retry_after)  # fmt: skip


async def test_retryable_failures_are_retried_honouring_retry_after() -> None:
    model = ScriptedModel([failure("rate_limited", retry_after=2.0),
                           failure("server_error", status=502), "sunny"], name="test")  # fmt: skip
    made, slept = client(model)
    response = await made.complete(ASK)
    assert response.message.content == "sunny"
    assert len(model.requests) == 3
    # 0.5 s * 2^0 * jitter 0.5 = 0.25, raised to the provider's 2 s; then 0.5 s * 2^1 * 0.5.
    assert slept == [2.0, 0.5]


async def test_failures_that_retrying_cannot_fix_are_not_retried() -> None:
    model = ScriptedModel([failure("auth", status=401), "never"], name="test")
    made, slept = client(model)
    with pytest.raises(ProviderError) as caught:
        await made.complete(ASK)
    assert caught.value.kind == "auth" and slept == [] and len(model.requests) == 1


async def test_retries_end_with_the_last_error() -> None:
    model = ScriptedModel([failure("overloaded", status=529)] * 3, name="test")
    made, slept = client(model, RetryPolicy(max_retries=2))
    with pytest.raises(ProviderError) as caught:
        await made.complete(ASK)
    assert caught.value.kind == "overloaded" and caught.value.status == 529
    assert len(model.requests) == 3 and len(slept) == 2


async def test_a_retry_after_longer_than_the_server_waits_fails_at_once_saying_so() -> None:
    model = ScriptedModel([failure("rate_limited", retry_after=3600), "late"], name="test")
    made, slept = client(model)
    with pytest.raises(ProviderError) as caught:
        await made.complete(ASK)
    assert "asks to wait 3600 s" in caught.value.message and slept == []


class _Breaks:
    """Streams two deltas, then fails as a dropped connection would."""

    name = "test"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.calls += 1
        yield TextDelta("Sun")
        yield TextDelta("ny")
        raise failure("connection", status=None)

    async def aclose(self) -> None:
        pass


async def test_a_failure_after_output_began_is_a_stream_cut_and_not_retried() -> None:
    provider = _Breaks()
    made, slept = client(provider)
    seen: list[str] = []
    with pytest.raises(ProviderError) as caught:
        await made.complete(ASK, lambda d: seen.append(d.text))  # type: ignore[union-attr]
    assert caught.value.kind == "stream_cut" and "connection" in caught.value.message
    assert seen == ["Sun", "ny"] and provider.calls == 1 and slept == []


class _Stalls:
    name = "test"

    def __init__(self) -> None:
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        try:
            yield TextDelta("thinking")
            await asyncio.sleep(60)
            yield TextDelta("never")
        finally:
            self.closed = True

    async def aclose(self) -> None:
        pass


async def test_the_call_timeout_bounds_a_stalled_stream_and_closes_it() -> None:
    provider = _Stalls()
    made, _ = client(provider, RetryPolicy(timeout=0.05))
    with pytest.raises(ProviderError) as caught:
        await made.complete(ASK)
    assert caught.value.kind == "stream_cut" and "timeout of 0.05 s" in caught.value.message
    assert provider.closed


async def test_cancelling_the_caller_closes_the_provider_stream() -> None:
    provider = _Stalls()
    made, _ = client(provider)
    started = asyncio.Event()
    task = asyncio.create_task(made.complete(ASK, lambda _: started.set()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.closed


async def test_closing_the_stream_early_closes_the_provider_stream() -> None:
    provider = _Stalls()
    made, _ = client(provider)
    stream = made.stream(ASK)
    assert await anext(stream) == TextDelta("thinking")
    await stream.aclose()  # type: ignore[attr-defined]
    assert provider.closed


SCHEMA = {
    "type": "object",
    "properties": {"headline": {"type": "string"}, "severity": {"enum": ["low", "high"]}},
    "required": ["headline", "severity"],
}


async def test_structured_output_is_parsed_and_checked() -> None:
    replies = [{"headline": "Disk full", "severity": "high"},
               '```json\n{"headline": "Fenced", "severity": "low"}\n```']  # fmt: skip
    made, _ = client(ScriptedModel(replies, name="test"))
    asked = ModelRequest("m", ASK.messages, response_schema=SCHEMA)
    assert (await made.complete(asked)).parsed == {"headline": "Disk full", "severity": "high"}
    assert (await made.complete(asked)).parsed == {"headline": "Fenced", "severity": "low"}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Disk full on db-1", "is not JSON (Expecting value at position 0)"),
        ({"headline": "Disk full", "severity": "urgent"}, "at /severity: 'urgent' is not one of"),
        ({"severity": "low"}, "at the top level: 'headline' is a required property"),
    ],
)
async def test_structured_output_that_does_not_fit_fails_clearly(reply: Any, expected: str) -> None:
    made, _ = client(ScriptedModel([reply], name="test"))
    with pytest.raises(ProviderError) as caught:
        await made.complete(ModelRequest("m", ASK.messages, response_schema=SCHEMA))
    assert caught.value.kind == "invalid_output"
    assert expected in caught.value.message


async def test_usage_is_estimated_when_the_provider_reports_none_then_calibrated() -> None:
    made, _ = client(ScriptedModel(["It is sunny and warm.",
                                    Reply("Sunny.", usage=Usage(40, 2, cached_tokens=8)),
                                    "Still sunny."], name="test"))  # fmt: skip
    first = await made.complete(ASK)
    assert first.usage.estimated and first.usage.input_tokens > 5
    assert 4 <= first.usage.output_tokens <= 8
    reported = await made.complete(ASK)
    assert reported.usage == Usage(40, 2, cached_tokens=8)
    # The reported count taught the estimator this model's ratio: the next estimate follows it.
    third = await made.complete(ASK)
    assert third.usage.estimated
    assert abs(third.usage.input_tokens - 40) <= abs(first.usage.input_tokens - 40)


async def test_more_output_than_the_model_gives_is_refused_before_the_call() -> None:
    model = ScriptedModel(["never"], name="test")
    made, _ = client(model)
    with pytest.raises(UnsupportedFeature) as caught:
        await made.complete(ModelRequest("m", ASK.messages, max_output_tokens=5_000))
    assert "maximum output of 1000" in caught.value.message and model.requests == []


async def test_the_function_model_decides_each_reply() -> None:
    async def echo(request: ModelRequest) -> Reply:
        return Reply(
            "", tool_calls=[{"name": "lookup", "arguments": {"q": request.messages[-1].content}}]
        )

    made, _ = client(FunctionModel(echo, name="test"))
    items = [item async for item in made.stream(ASK)]
    final = items[-1]
    assert isinstance(final, Finished)
    [call] = final.response.message.tool_calls
    assert call.name == "lookup" and call.arguments == {"q": ASK.messages[0].content}
    assert final.response.stop_reason == "tool_calls"


async def test_a_scripted_model_out_of_replies_says_so() -> None:
    made, _ = client(ScriptedModel([], name="test"))
    with pytest.raises(ProviderError, match="no reply left"):
        await made.complete(ASK)


@given(
    attempt=st.integers(0, 12),
    retry_after=st.none() | st.floats(0, 120),
    jitter=st.floats(0, 1),
)
def test_backoff_stays_within_its_ceiling_and_honours_retry_after(
    attempt: int, retry_after: float | None, jitter: float
) -> None:
    policy = RetryPolicy()
    delay = policy.delay(attempt, retry_after, lambda: jitter)
    ceiling = min(policy.max_backoff, policy.initial_backoff * 2**attempt)
    if retry_after is None:
        assert 0 <= delay <= ceiling
    else:
        assert delay >= retry_after and delay <= max(ceiling, retry_after)


async def test_sampling_settings_for_a_model_that_refuses_them_are_refused_before_the_call() -> (
    None
):
    model = ScriptedModel(["never"], name="test")
    reasoning = ModelInfo("test", "m", 8_000, 1_000, thinking="effort", sampling=False)
    made = ModelClient(model, lambda _: reasoning)
    with pytest.raises(UnsupportedFeature, match="does not take temperature or top_p"):
        await made.complete(ModelRequest("m", ASK.messages, temperature=0.2))
    assert model.requests == []
