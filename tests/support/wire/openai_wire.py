"""A fake OpenAI API (and OpenAI-compatible server): Chat Completions, Responses, models.

Routes (matched on the end of the path, so any prefix works as an OpenAI-compatible base URL):

- ``POST …/chat/completions``: the next queued reply, as a ``chat.completion`` or, when the
  request says ``"stream": true``, as ``chat.completion.chunk`` events (``data: {…}`` frames,
  then ``data: [DONE]``). The usage chunk (``choices: []``) comes last and only when the request
  asked for it with ``stream_options.include_usage``, as OpenAI does.
- ``POST …/responses``: the same reply as a Responses API ``response`` or its event stream
  (``response.created`` … ``response.completed``).
- ``GET …/models``: ``server.models``.

A request without ``Authorization: Bearer <api_key>`` gets a 401 (when ``api_key`` is set).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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

DEFAULT_MODEL = "gpt-4o-mini"
API_KEY = "sk-test-wire-openai"


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class Usage:
    """Token counts, reported as Chat Completions ``usage`` or Responses ``usage``."""

    prompt_tokens: int = 12
    completion_tokens: int = 7
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def chat(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning_tokens, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
            },
        }  # fmt: skip

    def responses(self) -> dict[str, Any]:
        return {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_tokens, "cache_write_tokens": 0},
            "output_tokens": self.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclass(frozen=True)
class ToolCall:
    """A function call. ``arguments`` as a str is sent verbatim (it may be broken JSON);
    ``fragments`` fixes exactly how a stream splits it (else pieces of ``chunk_size``)."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None
    fragments: Sequence[str] | None = None

    @property
    def raw_arguments(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)

    def pieces(self, size: int) -> list[str]:
        if self.fragments is not None:
            assert "".join(self.fragments) == self.raw_arguments, "fragments must add up"
            return list(self.fragments)
        return split_text(self.raw_arguments, size)


@dataclass(frozen=True)
class OpenAIReply:
    """One model turn, rendered for whichever endpoint and mode the request used.

    ``content`` (and ``reasoning_content``) as a sequence are the exact stream deltas; as a str
    they are cut into pieces of ``chunk_size``. ``json`` is a shortcut for a JSON text content
    (structured outputs). ``reasoning_content`` is not OpenAI's: it is the field OpenAI-compatible
    servers (vLLM, DeepSeek, llama.cpp) put reasoning in; on the Responses API it becomes a
    reasoning item with a summary (and, when the request's ``include`` asks for
    ``reasoning.encrypted_content``, an ``encrypted_content`` of ``enc:<item id>:<text>``).
    ``finish_reason`` defaults to ``tool_calls`` when there are tool calls, else ``stop``.

    Faults (streams): ``cut_after=N`` closes the connection after N events with no ``[DONE]``
    and no end of the chunked body; ``stall_after=N`` goes silent after N events;
    ``error_after=N`` sends ``data: {"error": …}`` after N events and ends the stream;
    ``delay`` waits before each event. On a non-streaming request ``cut_after`` (any value)
    sends half of the body, then closes.
    """

    content: str | Sequence[str] | None = None
    tool_calls: Sequence[ToolCall] = ()
    json: Any = None
    reasoning_content: str | Sequence[str] | None = None
    refusal: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = field(default_factory=Usage)
    usage_in_stream: Literal["requested", "always", "never"] = "requested"
    model: str | None = None  # default: the request's
    chunk_size: int = 4
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    stall_after: int | None = None
    error_after: int | None = None
    error: Mapping[str, Any] | None = None
    delay: float = 0.0

    # -- shared --

    def _content(self) -> str | Sequence[str] | None:
        if self.json is not None:
            return json.dumps(self.json)
        return self.content

    def _text(self) -> str | None:
        content = self._content()
        return content if content is None or isinstance(content, str) else "".join(content)

    def _reasoning(self) -> str | None:
        r = self.reasoning_content
        return r if r is None or isinstance(r, str) else "".join(r)

    def _finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    def _model(self, request: RecordedRequest) -> str:
        body = request.body if isinstance(request.body, dict) else {}
        return self.model or str(body.get("model") or DEFAULT_MODEL)

    def _calls(self) -> list[tuple[ToolCall, str]]:
        return [(call, call.id or _id("call_")) for call in self.tool_calls]

    def _stream(self, frames: list[bytes], headers: Mapping[str, str]) -> Rendered:
        if self.error_after is not None:
            error = self.error or {
                "message": "The server had an error while processing your request.",
                "type": "server_error", "param": None, "code": None,
            }  # fmt: skip
            frames = [*frames[: self.error_after], sse_frame({"error": dict(error)})]
        return Rendered(
            200, {**SSE_HEADERS, **headers, **self.headers}, events=frames,
            cut_after=self.cut_after, stall_after=self.stall_after, delay=self.delay,
        )  # fmt: skip

    def _whole(self, body: dict[str, Any]) -> Rendered:
        data = encode_json(body)
        cut = len(data) // 2 if self.cut_after is not None else None
        headers = {"content-type": "application/json", **_HEADERS, **self.headers}
        return Rendered(200, headers, data, cut_after=cut)

    def render(self, request: RecordedRequest) -> Rendered:
        if request.path.endswith("/responses"):
            return self.render_responses(request)
        return self.render_chat(request)

    # -- Chat Completions --

    def render_chat(self, request: RecordedRequest) -> Rendered:
        model = self._model(request)
        cid, created = _id("chatcmpl-"), int(time.time())
        calls = self._calls()
        if not request.stream:
            message: dict[str, Any] = {
                "role": "assistant", "content": self._text(), "refusal": self.refusal,
                "annotations": [],
            }  # fmt: skip
            if self.reasoning_content is not None:
                message["reasoning_content"] = self._reasoning()
            if calls:
                message["tool_calls"] = [
                    {"id": cid_, "type": "function",
                     "function": {"name": call.name, "arguments": call.raw_arguments}}
                    for call, cid_ in calls
                ]  # fmt: skip
            body: dict[str, Any] = {
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": self._finish()}],
                "usage": self.usage.chat() if self.usage else None,
                "service_tier": "default", "system_fingerprint": "fp_wire",
            }  # fmt: skip
            return self._whole(body)

        options = request.json.get("stream_options") or {}
        usage_chunk = self.usage is not None and (
            self.usage_in_stream == "always"
            or (self.usage_in_stream == "requested" and bool(options.get("include_usage")))
        )
        base: dict[str, Any] = {
            "id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "service_tier": "default", "system_fingerprint": "fp_wire",
        }  # fmt: skip
        if usage_chunk:
            base["usage"] = None  # every chunk says so when usage comes at the end

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return sse_frame({**base, "choices": [choice]})

        frames: list[bytes] = []
        role: dict[str, Any] = {"role": "assistant"}
        content = self._content()
        if content is not None or self.reasoning_content is not None or not calls:
            frames.append(chunk({**role, "content": "", "refusal": None}))
            role = {}
        for piece in split_text(self.reasoning_content or "", self.chunk_size):
            frames.append(chunk({"reasoning_content": piece}))
        for piece in split_text(content or "", self.chunk_size):
            frames.append(chunk({"content": piece}))
        if self.refusal is not None:
            for piece in split_text(self.refusal, self.chunk_size):
                frames.append(chunk({"refusal": piece}))
        for index, (call, call_id) in enumerate(calls):
            first = {
                "index": index, "id": call_id, "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }  # fmt: skip
            head = {**role, "content": None, "refusal": None} if role else {}
            frames.append(chunk({**head, "tool_calls": [first]}))
            role = {}
            for piece in call.pieces(self.chunk_size):
                frames.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))  # fmt: skip  # noqa: E501
        frames.append(chunk({}, self._finish()))
        if usage_chunk:
            assert self.usage is not None
            frames.append(sse_frame({**base, "choices": [], "usage": self.usage.chat()}))
        frames.append(sse_frame("[DONE]"))
        return self._stream(frames, _HEADERS)

    # -- Responses --

    def render_responses(self, request: RecordedRequest) -> Rendered:
        body = request.json
        rid, created = _id("resp_"), time.time()
        skeleton: dict[str, Any] = {
            "id": rid, "object": "response", "created_at": created, "status": "in_progress",
            "model": self._model(request), "output": [], "error": None,
            "incomplete_details": None, "instructions": body.get("instructions"),
            "metadata": body.get("metadata") or {}, "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "temperature": body.get("temperature", 1.0), "top_p": body.get("top_p", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}}, "usage": None,
            "previous_response_id": body.get("previous_response_id"),
        }  # fmt: skip
        status = "completed"
        incomplete = None
        if self.finish_reason == "length":
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}

        # The finished output items, and the events that build each of them.
        items: list[dict[str, Any]] = []
        builders: list[list[tuple[str, dict[str, Any]]]] = []
        reasoning = self._reasoning()
        if reasoning is not None:
            item_id = _id("rs_")
            index = len(items)
            item = {"id": item_id, "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": reasoning}]}  # fmt: skip
            if "reasoning.encrypted_content" in (body.get("include") or ()):
                # opaque to the client; it says which reasoning it stands for, so a test can
                # check what a client sends back on the next turn
                item["encrypted_content"] = f"enc:{item_id}:{reasoning}"
            ev: list[tuple[str, dict[str, Any]]] = [
                ("response.output_item.added",
                 {"output_index": index, "item": {**item, "summary": []}}),
                ("response.reasoning_summary_part.added",
                 {"item_id": item_id, "output_index": index, "summary_index": 0,
                  "part": {"type": "summary_text", "text": ""}}),
            ]  # fmt: skip
            for piece in split_text(self.reasoning_content or "", self.chunk_size):
                ev.append(("response.reasoning_summary_text.delta",
                           {"item_id": item_id, "output_index": index, "summary_index": 0,
                            "delta": piece}))  # fmt: skip
            ev += [
                ("response.reasoning_summary_text.done",
                 {"item_id": item_id, "output_index": index, "summary_index": 0,
                  "text": reasoning}),
                ("response.reasoning_summary_part.done",
                 {"item_id": item_id, "output_index": index, "summary_index": 0,
                  "part": {"type": "summary_text", "text": reasoning}}),
                ("response.output_item.done", {"output_index": index, "item": item}),
            ]  # fmt: skip
            items.append(item)
            builders.append(ev)
        text = self._text()
        if text is not None or not self.tool_calls:
            item_id, index = _id("msg_"), len(items)
            part = {"type": "output_text", "text": text or "", "annotations": [], "logprobs": []}
            item = {"id": item_id, "type": "message", "status": "completed",
                    "role": "assistant", "content": [part]}  # fmt: skip
            ev = [
                ("response.output_item.added",
                 {"output_index": index,
                  "item": {**item, "status": "in_progress", "content": []}}),
                ("response.content_part.added",
                 {"item_id": item_id, "output_index": index, "content_index": 0,
                  "part": {**part, "text": ""}}),
            ]  # fmt: skip
            for piece in split_text(self._content() or "", self.chunk_size):
                ev.append(("response.output_text.delta",
                           {"item_id": item_id, "output_index": index, "content_index": 0,
                            "delta": piece, "logprobs": []}))  # fmt: skip
            ev += [
                ("response.output_text.done",
                 {"item_id": item_id, "output_index": index, "content_index": 0,
                  "text": text or "", "logprobs": []}),
                ("response.content_part.done",
                 {"item_id": item_id, "output_index": index, "content_index": 0,
                  "part": part}),
                ("response.output_item.done", {"output_index": index, "item": item}),
            ]  # fmt: skip
            items.append(item)
            builders.append(ev)
        for call, call_id in self._calls():
            item_id, index = _id("fc_"), len(items)
            item = {"id": item_id, "type": "function_call", "status": "completed",
                    "call_id": call_id, "name": call.name,
                    "arguments": call.raw_arguments}  # fmt: skip
            ev = [
                ("response.output_item.added",
                 {"output_index": index,
                  "item": {**item, "status": "in_progress", "arguments": ""}}),
            ]  # fmt: skip
            for piece in call.pieces(self.chunk_size):
                ev.append(
                    (
                        "response.function_call_arguments.delta",
                        {"item_id": item_id, "output_index": index, "delta": piece},
                    )
                )
            ev += [
                ("response.function_call_arguments.done",
                 {"item_id": item_id, "output_index": index, "name": call.name,
                  "arguments": call.raw_arguments}),
                ("response.output_item.done", {"output_index": index, "item": item}),
            ]  # fmt: skip
            items.append(item)
            builders.append(ev)

        final = {
            **skeleton, "status": status, "incomplete_details": incomplete, "output": items,
            "usage": self.usage.responses() if self.usage else None,
        }  # fmt: skip
        if not request.stream:
            return self._whole(final)

        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": skeleton}),
            ("response.in_progress", {"response": skeleton}),
        ]
        for ev in builders:
            events.extend(ev)
        done = "response.completed" if status == "completed" else "response.incomplete"
        events.append((done, {"response": final}))
        frames = [
            sse_frame({"type": name, "sequence_number": n, **data}, event=name)
            for n, (name, data) in enumerate(events)
        ]
        return self._stream(frames, _HEADERS)


_HEADERS = {"openai-processing-ms": "12", "x-request-id": "req_wire"}


def error_body(
    message: str, type_: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def rate_limited(
    retry_after: float | None = 0.1, *, retry_after_ms: float | None = None
) -> JSONReply:
    """429 as OpenAI sends it: ``retry-after`` (seconds; the SDK takes fractions) and/or
    ``retry-after-ms``, plus the ``x-ratelimit-*`` headers."""
    headers = {"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "0",
               "x-ratelimit-reset-requests": "120ms"}  # fmt: skip
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = f"{retry_after_ms:g}"
    body = error_body(
        "Rate limit reached for gpt-4o-mini in organization org-wire on requests per min "
        "(RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.",
        "requests", "rate_limit_exceeded",
    )  # fmt: skip
    return JSONReply(body, 429, headers)


def server_error(status: int = 500, *, retry_after: float | None = None) -> JSONReply:
    """A 5xx with OpenAI's body. Without ``retry_after`` the SDK backs off ~0.5 s first."""
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    body = error_body(
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
    )
    return JSONReply(body, status, headers)


def api_error(
    status: int, message: str, type_: str = "invalid_request_error", code: str | None = None,
    param: str | None = None, headers: Mapping[str, str] | None = None,
) -> JSONReply:  # fmt: skip
    """Any other error, e.g. ``api_error(400, "…", code="context_length_exceeded")``."""
    return JSONReply(error_body(message, type_, code, param), status, dict(headers or {}))


class OpenAIServer(WireServer):
    """The fake OpenAI API. ``models`` is what ``GET /models`` lists."""

    def __init__(
        self, *, api_key: str | None = API_KEY, prefix: str | None = None,
        models: Sequence[str] = (DEFAULT_MODEL, "gpt-4.1", "o4-mini"),
    ) -> None:  # fmt: skip
        super().__init__(api_key=api_key, prefix=prefix)
        self.models = list(models)
        self.route("POST", "/chat/completions", self.scripted)
        self.route("POST", "/responses", self.scripted)
        self.route("GET", "/models", self._models)

    @property
    def open_connections(self) -> int:
        """Client connections the server holds open right now (one closed by the client is
        dropped as soon as the server next writes to it or reads from it)."""
        http = self._http
        if http is None:
            return 0
        with http.connections_lock:
            return len(http.open_connections)

    def _models(self, request: RecordedRequest) -> Rendered:
        data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "wire"}
                for m in self.models]  # fmt: skip
        return JSONReply({"object": "list", "data": data}).render(request)

    def error_response(self, status: int, message: str, headers: Mapping[str, str]) -> Rendered:
        return api_error(status, message, "invalid_request_error", headers=headers).render(_EMPTY)

    def authorize(self, request: RecordedRequest) -> Rendered | None:
        if self.api_key is None or request.header("authorization") == f"Bearer {self.api_key}":
            return None
        body = error_body(
            "Incorrect API key provided. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error", "invalid_api_key",
        )  # fmt: skip
        return JSONReply(body, 401).render(request)


_EMPTY = RecordedRequest("", "", {}, {}, b"", None, 0.0)
