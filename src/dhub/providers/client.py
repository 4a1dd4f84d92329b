"""The front of every model call: checks against the catalog, retries, the per-call timeout,
structured output and usage accounting, around one adapter (``ModelProvider``).

Retries happen only before the first delta: once text has streamed to a user it cannot be
taken back, so a failure after that is a ``stream_cut`` error, never a silent second answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from dhub.providers.catalog import ModelInfo
from dhub.providers.errors import ProviderError, UnsupportedFeature
from dhub.providers.structured import parse_output
from dhub.providers.tokens import TokenCounter, estimate_request, estimate_text
from dhub.providers.types import (
    Delta,
    Finished,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    StreamItem,
    Usage,
)


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` after the first attempt, waits growing from ``initial_backoff`` by 2x up
    to ``max_backoff`` with full jitter; a provider's ``Retry-After`` is honoured (waited at
    least) unless it asks for more than ``max_retry_after``, which fails the call at once
    saying so. ``timeout`` bounds one attempt, request to last delta."""

    max_retries: int = 3
    initial_backoff: float = 0.5
    max_backoff: float = 30.0
    max_retry_after: float = 60.0
    timeout: float = 600.0

    def delay(self, attempt: int, retry_after: float | None, rng: Callable[[], float]) -> float:
        ceiling = min(self.max_backoff, self.initial_backoff * 2**attempt)
        jittered: float = ceiling * rng()
        return max(jittered, retry_after) if retry_after is not None else jittered


Sleep = Callable[[float], Awaitable[None]]


class ModelClient:
    """Calls one provider entry. ``stream`` yields deltas and a final ``Finished`` whose
    response has usage (estimated when the provider reported none) and, when the request had
    a ``response_schema``, the ``parsed`` value."""

    def __init__(
        self,
        provider: ModelProvider,
        models: Callable[[str], ModelInfo],
        policy: RetryPolicy | None = None,
        counter: TokenCounter | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.provider = provider
        self.models = models
        self.policy = policy or RetryPolicy()
        self.counter = counter or TokenCounter()
        self._sleep = sleep
        self._rng = rng

    @property
    def name(self) -> str:
        return self.provider.name

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        info = self.models(request.model)
        self._check(request, info)
        attempt = 0
        while True:
            yielded = False
            try:
                async with _Closing(self._attempt(request)) as items:
                    async for item in items:
                        if isinstance(item, Finished):
                            yield Finished(self._finish(request, item.response))
                            return
                        yielded = True
                        yield item
                raise self._error(request, "stream_cut", "the stream ended without an answer")
            except ProviderError as exc:
                if yielded and exc.retryable:
                    raise _cut(exc) from exc
                if yielded or not exc.retryable or attempt >= self.policy.max_retries:
                    raise
                delay = self.policy.delay(attempt, exc.retry_after, self._rng)
                if delay > self.policy.max_retry_after:
                    raise _too_long(exc, delay) from exc
                attempt += 1
            await self._sleep(delay)

    async def complete(
        self, request: ModelRequest, on_delta: Callable[[Delta], None] | None = None
    ) -> ModelResponse:
        """The final response; each delta goes to ``on_delta`` first."""
        async with _Closing(self.stream(request)) as items:
            async for item in items:
                if isinstance(item, Finished):
                    return item.response
                if on_delta is not None:
                    on_delta(item)
        raise self._error(request, "stream_cut", "the stream ended without an answer")

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """One call, each wait for the next item bounded by what is left of the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.policy.timeout
        async with _Closing(self.provider.stream(request)) as items:
            iterator = aiter(items)
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        item = await anext(iterator)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise self._error(
                        request, "timeout",
                        f"no complete answer within the call timeout of {self.policy.timeout:g} s",
                    ) from None  # fmt: skip
                yield item

    def _check(self, request: ModelRequest, info: ModelInfo) -> None:
        if not info.sampling and (request.temperature is not None or request.top_p is not None):
            raise UnsupportedFeature(
                "this model does not take temperature or top_p (a reasoning model sets its "
                "own sampling); remove them, or steer it with reasoning_effort",
                provider=self.name,
                model=request.model,
            )
        wanted = request.max_output_tokens
        if wanted is not None and wanted > info.max_output_tokens:
            raise UnsupportedFeature(
                f"max_output_tokens {wanted} is more than the model's maximum output of "
                f"{info.max_output_tokens} tokens; lower it",
                provider=self.name,
                model=request.model,
            )

    def _finish(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        provider, model = self.name, request.model
        estimated = estimate_request(request)
        usage = response.usage
        if usage.input_tokens == 0 and usage.output_tokens == 0:
            text = response.message.content + response.message.reasoning
            usage = Usage(
                self.counter.count_request(provider, model, request),
                self.counter.count_text(provider, model, text)
                + sum(estimate_text(str(c.arguments)) for c in response.message.tool_calls),
                estimated=True,
            )
        else:
            self.counter.observe(provider, model, estimated, usage.input_tokens)
        parsed = response.parsed
        if request.response_schema is not None and not response.message.tool_calls:
            parsed = parse_output(response.message.content, request.response_schema,
                                  provider, model)  # fmt: skip
        return dataclasses.replace(response, usage=usage, parsed=parsed)

    def _error(self, request: ModelRequest, kind: str, message: str) -> ProviderError:
        return ProviderError(kind, message, provider=self.name, model=request.model)  # type: ignore[arg-type]


def _cut(exc: ProviderError) -> ProviderError:
    return ProviderError(
        "stream_cut",
        f"the answer broke off after it had begun streaming ({exc.kind}: {exc.message})",
        provider=exc.provider, model=exc.model, status=exc.status, retry_after=exc.retry_after,
    )  # fmt: skip


def _too_long(exc: ProviderError, delay: float) -> ProviderError:
    return ProviderError(
        exc.kind,
        f"{exc.message} (the provider asks to wait {delay:.0f} s before retrying, longer "
        "than this server waits; try again later)",
        provider=exc.provider, model=exc.model, status=exc.status, retry_after=exc.retry_after,
    )  # fmt: skip


class _Closing:
    """``async with _Closing(agen) as it``: the generator is closed on the way out, so an
    abandoned stream closes its HTTP response now, not when garbage collected."""

    def __init__(self, stream: AsyncIterator[StreamItem]) -> None:
        self._stream = stream

    async def __aenter__(self) -> AsyncIterator[StreamItem]:
        return self._stream

    async def __aexit__(self, *exc: object) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()
