"""The Anthropic adapter: the Messages API through the official ``anthropic`` SDK.

It streams the raw events (``messages.create(stream=True)``, not the SDK's ``messages.stream``
helper, which raises a bare ``ValueError`` on broken tool JSON) and puts the answer together
itself. The SDK retries nothing (``max_retries=0``): ``ModelClient`` retries above it.

What the SDK does that this module answers for (docs/testing.md):

- a stream cut in the middle raises the transport's own error (``httpx2.RemoteProtocolError``
  and friends), not an ``anthropic`` exception;
- a stream that ends early but cleanly (no ``message_stop``) raises nothing;
- an ``error`` event mid-stream is an ``APIStatusError`` of the stream's HTTP status (200),
  the error in its body.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import anthropic
import httpx2
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from anthropic.types import TextDelta as WireTextDelta

from dhub.providers.anthropic_wire_format import REPLAY_KEY, build_params
from dhub.providers.assemble import ToolCalls
from dhub.providers.catalog import ModelInfo
from dhub.providers.errors import ErrorKind, ProviderError, kind_for_status, retry_after_seconds
from dhub.providers.types import (
    Finished,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StopReason,
    StreamItem,
    TextDelta,
    ToolCallDelta,
    Usage,
)

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "pause_turn": "end",  # only with server tools, which dhub does not send
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}

# The ``type`` of an ``error`` event (or error body) as dhub's kinds.
ERROR_TYPES: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
    "api_error": "server_error",
    "timeout_error": "timeout",
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_request_error": "bad_request",
    "not_found_error": "bad_request",
    "request_too_large": "bad_request",
}


class AnthropicAdapter:
    """One configured Anthropic-wire provider entry (``ModelProvider``)."""

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None,
        base_url: str | None,
        models: Callable[[str], ModelInfo],
        timeout: float = 600.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self._models = models
        self._secret = api_key
        extra: dict[str, str | anthropic.Omit] = dict(headers or {})
        if api_key is None and not any(h.lower() == "authorization" for h in extra):
            # No key configured: a server that needs none. An explicit (empty) key keeps the
            # SDK from looking for credentials of its own (ANTHROPIC_API_KEY, profile files on
            # disk, workload identity); omitting the header keeps it from sending "Bearer ".
            extra["Authorization"] = anthropic.Omit()
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key if api_key is not None else "",
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            default_headers=cast(Mapping[str, str], extra),
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        info = self._models(request.model)
        params = build_params(request, info, self.name)
        turn = _Turn(self.name, request.model)
        try:
            events = await self._client.messages.create(**params, stream=True)
        except (anthropic.APIError, httpx2.HTTPError) as exc:
            raise self._error(exc, request.model, yielded=False) from exc
        yielded = False
        async with events:
            try:
                async for event in events:
                    for item in turn.handle(event):
                        yielded = True
                        yield item
            except (anthropic.APIError, httpx2.HTTPError) as exc:
                raise self._error(exc, request.model, yielded=yielded) from exc
            except json.JSONDecodeError as exc:
                raise self._fail(
                    "stream_cut" if yielded else "provider_error",
                    f"the stream sent an event that is not JSON ({exc.msg})", request.model,
                ) from exc  # fmt: skip
        if not turn.stopped:
            raise self._fail(
                "stream_cut" if yielded else "connection",
                "the stream ended before the message was complete (no message_stop)",
                request.model,
            )
        yield Finished(turn.finish())

    # -- errors --

    def _fail(
        self, kind: ErrorKind, message: str, model: str, *, status: int | None = None,
        retry_after: float | None = None,
    ) -> ProviderError:  # fmt: skip
        return ProviderError(kind, self._scrub(message), provider=self.name, model=model,
                             status=status, retry_after=retry_after)  # fmt: skip

    def _scrub(self, text: str) -> str:
        """Never show the key, whatever echoes it back."""
        if self._secret:
            text = text.replace(self._secret, "<api key>")
        return text

    def _error(self, exc: Exception, model: str, *, yielded: bool) -> ProviderError:
        if isinstance(exc, anthropic.APIStatusError):
            message = exc.api_message or _body_text(exc.body) or exc.message
            if exc.status_code < 400:  # an ``error`` event in a stream that began as a 200
                error_type = exc.type or "unknown"
                if yielded:
                    return self._fail(
                        "stream_cut",
                        f"the stream failed after the answer began: {message} ({error_type})",
                        model,
                    )
                kind = ERROR_TYPES.get(error_type, "provider_error")
                return self._fail(kind, f"{message} ({error_type}, in the stream)", model)
            return self._fail(
                kind_for_status(exc.status_code), message, model, status=exc.status_code,
                retry_after=retry_after_seconds(exc.response.headers),
            )  # fmt: skip
        cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) else exc
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
        timed_out = isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException)
        if yielded:
            what = "timed out" if timed_out else "broke off"
            return self._fail("stream_cut", f"the stream {what} after the answer began "
                                            f"({detail})", model)  # fmt: skip
        if timed_out:
            return self._fail("timeout", f"no answer within the timeout ({detail})", model)
        if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
            return self._fail("connection", f"the connection failed ({detail})", model)
        return self._fail("provider_error", str(exc), model)


def _body_text(body: object) -> str:
    if body is None:
        return ""
    return body if isinstance(body, str) else json.dumps(body)[:500]


# -- the answer, put together from the events --------------------------------------------------


@dataclass
class _Block:
    type: str
    parts: list[str] = field(default_factory=list)
    signature: str = ""
    data: str = ""
    tool_index: int = -1
    tool_input: dict[str, object] | None = None  # a tool_use that started with its input
    fragments: int = 0


class _Turn:
    """The state of one streamed message: deltas out as they come, the message at the end."""

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.reported_model = model
        self.blocks: dict[int, _Block] = {}
        self.tools = ToolCalls(provider, model)
        self.tool_count = 0
        self.stop_reason: str | None = None
        self.start_usage: dict[str, int] = {}
        self.end_usage: dict[str, int] = {}
        self.stopped = False

    def handle(self, event: RawMessageStreamEvent) -> Iterator[StreamItem]:
        if isinstance(event, RawMessageStartEvent):
            self.reported_model = event.message.model or self.model
            self.start_usage = _counts(event.message.usage)
        elif isinstance(event, RawContentBlockStartEvent):
            yield from self._start(event)
        elif isinstance(event, RawContentBlockDeltaEvent):
            yield from self._delta(event)
        elif isinstance(event, RawContentBlockStopEvent):
            block = self.blocks.get(event.index)
            if block is not None and block.tool_input and not block.fragments:
                yield self._tool_delta(block, ToolCallDelta(
                    block.tool_index, arguments=json.dumps(block.tool_input)
                ))  # fmt: skip
        elif isinstance(event, RawMessageDeltaEvent):
            if event.delta.stop_reason is not None:
                self.stop_reason = event.delta.stop_reason
            self.end_usage = _counts(event.usage)
        elif isinstance(event, RawMessageStopEvent):
            self.stopped = True

    def _start(self, event: RawContentBlockStartEvent) -> Iterator[StreamItem]:
        content = event.content_block
        if isinstance(content, TextBlock):
            block = self.blocks[event.index] = _Block("text")
            if content.text:
                block.parts.append(content.text)
                yield TextDelta(content.text)
        elif isinstance(content, ThinkingBlock):
            block = self.blocks[event.index] = _Block("thinking", signature=content.signature)
            if content.thinking:
                block.parts.append(content.thinking)
                yield ReasoningDelta(content.thinking)
        elif isinstance(content, RedactedThinkingBlock):
            self.blocks[event.index] = _Block("redacted_thinking", data=content.data)
        elif isinstance(content, ToolUseBlock):
            block = _Block("tool_use", tool_index=self.tool_count)
            block.tool_input = dict(content.input) if isinstance(content.input, dict) else None
            self.blocks[event.index] = block
            self.tool_count += 1
            yield self._tool_delta(
                block, ToolCallDelta(block.tool_index, id=content.id, name=content.name)
            )
        # Other blocks come from server tools, which dhub does not send.

    def _delta(self, event: RawContentBlockDeltaEvent) -> Iterator[StreamItem]:
        block = self.blocks.get(event.index)
        delta = event.delta
        if block is None:
            return
        if isinstance(delta, WireTextDelta):
            block.parts.append(delta.text)
            yield TextDelta(delta.text)
        elif isinstance(delta, ThinkingDelta):
            block.parts.append(delta.thinking)
            yield ReasoningDelta(delta.thinking)
        elif isinstance(delta, SignatureDelta):
            block.signature = delta.signature
        elif isinstance(delta, InputJSONDelta) and delta.partial_json:
            block.fragments += 1
            yield self._tool_delta(block, ToolCallDelta(block.tool_index,
                                                        arguments=delta.partial_json))  # fmt: skip

    def _tool_delta(self, block: _Block, delta: ToolCallDelta) -> ToolCallDelta:
        self.tools.add(delta)
        return delta

    def finish(self) -> ModelResponse:
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        text = "".join("".join(b.parts) for b in ordered if b.type == "text")
        thoughts = ["".join(b.parts) for b in ordered if b.type == "thinking"]
        replay: list[dict[str, Any]] = []
        for block in ordered:
            if block.type == "thinking":
                replay.append({"type": "thinking", "thinking": "".join(block.parts),
                               "signature": block.signature})  # fmt: skip
            elif block.type == "redacted_thinking":
                replay.append({"type": "redacted_thinking", "data": block.data})
        message = Message(
            "assistant",
            text,
            tool_calls=self.tools.finish(),
            reasoning="\n\n".join(t for t in thoughts if t),
            replay={REPLAY_KEY: replay} if replay else {},
        )
        usage = {**self.start_usage, **self.end_usage}
        cache_read = usage.get("cache_read_input_tokens", 0)
        return ModelResponse(
            message=message,
            usage=Usage(
                input_tokens=usage.get("input_tokens", 0)
                + cache_read
                + usage.get("cache_creation_input_tokens", 0),
                output_tokens=usage.get("output_tokens", 0),
                reasoning_tokens=usage.get("thinking_tokens", 0),
                cached_tokens=cache_read,
            ),
            stop_reason=STOP_REASONS.get(self.stop_reason or "end_turn", "end"),
            provider=self.provider,
            model=self.reported_model,
        )


def _counts(usage: Any) -> dict[str, int]:
    """The token counts a usage object reports (those it leaves out or null are absent)."""
    counts: dict[str, int] = {}
    for name in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                 "cache_creation_input_tokens"):  # fmt: skip
        value = getattr(usage, name, None)
        if isinstance(value, int):
            counts[name] = value
    details = getattr(usage, "output_tokens_details", None)
    thinking = getattr(details, "thinking_tokens", None)
    if isinstance(thinking, int):
        counts["thinking_tokens"] = thinking
    return counts
