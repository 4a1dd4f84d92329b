"""A fake Anthropic Messages API.

Routes:

- ``POST /v1/messages``: the next queued reply, as a ``message`` or, when the request says
  ``"stream": true``, as the event stream: ``message_start``, ``ping``, then for each content
  block ``content_block_start``, its ``content_block_delta`` events (``text_delta``,
  ``thinking_delta`` then one ``signature_delta``, ``input_json_delta``) and
  ``content_block_stop``, then ``message_delta`` (stop reason, output tokens) and
  ``message_stop``. Each frame is ``event: TYPE`` + ``data: {"type": TYPE, …}``.
- ``POST /v1/messages/count_tokens``: ``{"input_tokens": server.token_count}``.
- ``GET /v1/models``: ``server.models``.

A request without ``x-api-key: <api_key>`` (or ``Authorization: Bearer <api_key>``) gets a 401
(when ``api_key`` is set).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.wire.server import (
    SSE_HEADERS,
    JSONReply,
    RecordedRequest,
    Rendered,
    WireServer,
    encode_json,
    split_text,
    sse_frame,
)

DEFAULT_MODEL = "claude-wire-1"  # made up: the SDK warns about deprecated names
API_KEY = "sk-ant-test-wire"


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 25
    output_tokens: int = 9
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    thinking_tokens: int | None = None  # ``output_tokens_details.thinking_tokens`` when set

    def start(self) -> dict[str, Any]:
        """As ``message_start`` reports it: the input side, and output so far (1)."""
        start = {**self.whole(), "output_tokens": 1}
        start.pop("output_tokens_details", None)
        return start

    def whole(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "output_tokens": self.output_tokens,
            "service_tier": "standard",
            **self._details(),
        }

    def delta(self) -> dict[str, Any]:
        """As ``message_delta`` reports it by default: the output side only."""
        return {"output_tokens": self.output_tokens, **self._details()}

    def _details(self) -> dict[str, Any]:
        if self.thinking_tokens is None:
            return {}
        return {"output_tokens_details": {"thinking_tokens": self.thinking_tokens}}


@dataclass(frozen=True)
class Text:
    text: str | Sequence[str]  # a sequence: the exact deltas


@dataclass(frozen=True)
class Thinking:
    """An extended-thinking block: ``thinking_delta`` events, then one ``signature_delta``."""

    thinking: str | Sequence[str]
    signature: str = "EqQBCkgIAxABGAIiQL0wire-signature"


@dataclass(frozen=True)
class RedactedThinking:
    data: str = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj"


@dataclass(frozen=True)
class ToolUse:
    """A ``tool_use`` block. ``input`` as a str is the raw JSON, sent verbatim in the stream
    (it may be broken); ``fragments`` fixes exactly how ``input_json_delta`` splits it."""

    name: str
    input: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    fragments: Sequence[str] | None = None

    @property
    def raw_input(self) -> str:
        return self.input if isinstance(self.input, str) else json.dumps(self.input)

    def pieces(self, size: int) -> list[str]:
        if self.fragments is not None:
            assert "".join(self.fragments) == self.raw_input, "fragments must add up"
            return list(self.fragments)
        return split_text(self.raw_input, size)


Block = Text | Thinking | RedactedThinking | ToolUse


def _joined(value: str | Sequence[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


@dataclass(frozen=True)
class AnthropicReply:
    """One assistant message, rendered whole or as the event stream.

    ``content``: a str is one text block. ``stop_reason`` defaults to ``tool_use`` when there
    is a ``ToolUse`` block, else ``end_turn``.

    Faults (streams): ``cut_after=N`` closes the connection after N events (no
    ``message_stop``, no end of the chunked body); ``stall_after=N`` goes silent after N
    events; ``error_after=N`` sends an ``event: error`` (``overloaded_error`` unless ``error``
    says otherwise) after N events, as Anthropic does mid-stream, and ends the stream;
    ``delay`` waits before each event. On a non-streaming request ``cut_after`` (any value)
    sends half of the body, then closes.
    """

    content: str | Sequence[Block] = ()
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None  # default: the request's
    chunk_size: int = 4
    ping: bool = True
    full_delta_usage: bool = False  # message_delta repeats the input side too (newer API)
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    stall_after: int | None = None
    error_after: int | None = None
    error: Mapping[str, Any] | None = None
    delay: float = 0.0

    def blocks(self) -> list[Block]:
        return [Text(self.content)] if isinstance(self.content, str) else list(self.content)

    def _stop(self) -> str:
        tool = any(isinstance(b, ToolUse) for b in self.blocks())
        return self.stop_reason or ("tool_use" if tool else "end_turn")

    def render(self, request: RecordedRequest) -> Rendered:
        body = request.body if isinstance(request.body, dict) else {}
        model = self.model or str(body.get("model") or DEFAULT_MODEL)
        blocks = [(b, (b.id or _id("toolu_")) if isinstance(b, ToolUse) else None)
                  for b in self.blocks()]  # fmt: skip
        headers = {"request-id": _id("req_"), **self.headers}
        message: dict[str, Any] = {
            "id": _id("msg_"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
        }  # fmt: skip
        if not request.stream:
            whole = {
                **message, "content": [_whole_block(b, tid) for b, tid in blocks],
                "stop_reason": self._stop(), "stop_sequence": self.stop_sequence,
                "usage": self.usage.whole(),
            }  # fmt: skip
            data = encode_json(whole)
            cut = len(data) // 2 if self.cut_after is not None else None
            return Rendered(200, {"content-type": "application/json", **headers}, data,
                            cut_after=cut)  # fmt: skip

        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": {**message, "usage": self.usage.start()}}
        ]
        if self.ping:
            events.append({"type": "ping"})
        for index, (block, tid) in enumerate(blocks):
            events.extend(self._block_events(index, block, tid))
        events.append({
            "type": "message_delta",
            "delta": {"stop_reason": self._stop(), "stop_sequence": self.stop_sequence},
            "usage": self.usage.whole() if self.full_delta_usage
            else self.usage.delta(),
        })  # fmt: skip
        events.append({"type": "message_stop"})
        if self.error_after is not None:
            error = self.error or {"type": "overloaded_error", "message": "Overloaded"}
            events = [*events[: self.error_after], {"type": "error", "error": dict(error)}]
        frames = [sse_frame(e, event=e["type"]) for e in events]
        return Rendered(
            200, {**SSE_HEADERS, **headers}, events=frames, cut_after=self.cut_after,
            stall_after=self.stall_after, delay=self.delay,
        )  # fmt: skip

    def _block_events(self, index: int, block: Block, tid: str | None) -> list[dict[str, Any]]:
        def delta(payload: dict[str, Any]) -> dict[str, Any]:
            return {"type": "content_block_delta", "index": index, "delta": payload}

        def start(content_block: dict[str, Any]) -> dict[str, Any]:
            return {"type": "content_block_start", "index": index, "content_block": content_block}

        out: list[dict[str, Any]] = []
        if isinstance(block, Text):
            out.append(start({"type": "text", "text": ""}))
            out += [delta({"type": "text_delta", "text": piece})
                    for piece in split_text(block.text, self.chunk_size)]  # fmt: skip
        elif isinstance(block, Thinking):
            out.append(start({"type": "thinking", "thinking": "", "signature": ""}))
            out += [delta({"type": "thinking_delta", "thinking": piece})
                    for piece in split_text(block.thinking, self.chunk_size)]  # fmt: skip
            out.append(delta({"type": "signature_delta", "signature": block.signature}))
        elif isinstance(block, RedactedThinking):
            out.append(start({"type": "redacted_thinking", "data": block.data}))
        else:
            assert isinstance(tid, str)
            out.append(start({"type": "tool_use", "id": tid, "name": block.name, "input": {}}))
            out.append(delta({"type": "input_json_delta", "partial_json": ""}))
            out += [delta({"type": "input_json_delta", "partial_json": piece})
                    for piece in block.pieces(self.chunk_size)]  # fmt: skip
        out.append({"type": "content_block_stop", "index": index})
        return out


def _whole_block(block: Block, tid: str | None) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": _joined(block.text)}
    if isinstance(block, Thinking):
        return {"type": "thinking", "thinking": _joined(block.thinking),
                "signature": block.signature}  # fmt: skip
    if isinstance(block, RedactedThinking):
        return {"type": "redacted_thinking", "data": block.data}
    assert isinstance(tid, str)
    try:
        tool_input = json.loads(block.raw_input)
    except ValueError as exc:
        raise ValueError(
            "a whole (non-streaming) message always carries tool input as a JSON object: "
            "broken tool input JSON only exists in streams"
        ) from exc
    return {"type": "tool_use", "id": tid, "name": block.name, "input": tool_input}


def error_body(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message},
            "request_id": _id("req_")}  # fmt: skip


def api_error(
    status: int, type_: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONReply:
    """Any error, e.g. ``api_error(400, "invalid_request_error", "prompt is too long")``."""
    return JSONReply(error_body(type_, message), status, dict(headers or {}))


def rate_limited(
    retry_after: float | None = 0.1, *, retry_after_ms: float | None = None
) -> JSONReply:
    """429 ``rate_limit_error`` with ``retry-after`` (seconds; the SDK takes fractions)."""
    headers = {"anthropic-ratelimit-requests-limit": "50",
               "anthropic-ratelimit-requests-remaining": "0"}  # fmt: skip
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = f"{retry_after_ms:g}"
    return api_error(
        429, "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute.", headers,
    )  # fmt: skip


def overloaded(retry_after: float | None = None) -> JSONReply:
    """529 ``overloaded_error``. Without ``retry_after`` the SDK backs off ~0.5 s first."""
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return api_error(529, "overloaded_error", "Overloaded", headers)


class AnthropicServer(WireServer):
    """The fake Anthropic API. ``models`` is what ``GET /v1/models`` lists; ``token_count``
    what ``count_tokens`` answers."""

    def __init__(
        self, *, api_key: str | None = API_KEY, prefix: str | None = None,
        models: Sequence[str] = (DEFAULT_MODEL, "claude-wire-2"),
    ) -> None:  # fmt: skip
        super().__init__(api_key=api_key, prefix=prefix)
        self.models = list(models)
        self.token_count = 42
        self.route("POST", "/messages", self.scripted)
        self.route("POST", "/messages/count_tokens", self._count_tokens)
        self.route("GET", "/models", self._models)

    @property
    def base_url(self) -> str:
        """The Anthropic SDK appends ``/v1/messages`` itself: its base URL is the origin."""
        return f"{self.origin}{self.prefix.removesuffix('/v1')}"

    def _count_tokens(self, request: RecordedRequest) -> Rendered:
        return JSONReply({"input_tokens": self.token_count}).render(request)

    def _models(self, request: RecordedRequest) -> Rendered:
        data = [{"type": "model", "id": m, "display_name": m.replace("-", " ").title(),
                 "created_at": "2025-09-29T00:00:00Z", "lifecycle": "active"}
                for m in self.models]  # fmt: skip
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        body = {"data": data, "has_more": False, "first_id": first, "last_id": last}
        return JSONReply(body).render(request)

    def error_response(self, status: int, message: str, headers: Mapping[str, str]) -> Rendered:
        return api_error(status, "invalid_request_error", message, headers).render(_EMPTY)

    def authorize(self, request: RecordedRequest) -> Rendered | None:
        key = request.header("x-api-key")
        if self.api_key is None or self.api_key in (key, _bearer(request)):
            return None
        return api_error(401, "authentication_error", "invalid x-api-key").render(request)


def _bearer(request: RecordedRequest) -> str | None:
    value = request.header("authorization") or ""
    return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None


_EMPTY = RecordedRequest("", "", {}, {}, b"", None, 0.0)
