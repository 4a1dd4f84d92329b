"""OpenAI Chat Completions for ``OpenAIAdapter`` (``dhub.providers.openai``): the request body
and a reader that turns ``chat.completion.chunk`` events into dhub stream items.

Also the checks and helpers both OpenAI wire APIs share (``openai_responses`` imports them):
what a model refuses, whether a JSON schema is strict-compatible, tool-result text and the kind
of an error reported inside a stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from openai.types.chat import ChatCompletionChunk
from openai.types.completion_usage import CompletionUsage

from dhub.providers.assemble import ToolCalls
from dhub.providers.catalog import ModelInfo
from dhub.providers.errors import ErrorKind, ProviderError, UnsupportedFeature
from dhub.providers.reasoning import openai_effort
from dhub.providers.types import (
    Delta,
    Effort,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StopReason,
    TextDelta,
    ToolCallDelta,
    Usage,
)

ERROR_PREFIX = "Error: "  # what a failed tool's result starts with, so the model knows
# Where OpenAI-compatible servers stream reasoning: vLLM/DeepSeek/llama.cpp ``reasoning_content``,
# Ollama and newer vLLM ``reasoning``. Neither is a field of the SDK's delta type.
REASONING_FIELDS = ("reasoning_content", "reasoning")

# -- shared by both wire APIs ------------------------------------------------------------------


def check_request(request: ModelRequest, info: ModelInfo, provider: str) -> Effort | None:
    """Refuse what the model cannot do (``UnsupportedFeature``, before anything is sent) and
    return the native reasoning effort to send (None: send nothing)."""

    def refuse(message: str) -> UnsupportedFeature:
        return UnsupportedFeature(message, provider=provider, model=request.model)

    if request.tools and not info.tools:
        raise refuse(
            "this model does not support tool calling; remove the tools, or pick a model "
            "with tools (GET /api/v1/models lists its capabilities)"
        )
    for message in request.messages:
        if message.images and message.role != "user":
            raise refuse(
                f"images can only be sent in user messages, not in a {message.role} message"
            )
        if message.images and not info.vision:
            raise refuse(
                "this model does not accept images; remove the images from the messages, "
                "or pick a vision model (GET /api/v1/models lists which accept images)"
            )
    if request.response_schema is not None and not info.structured_output:
        raise refuse(
            "this model does not support structured output; remove response_schema, or pick "
            "a model with structured output (GET /api/v1/models lists its capabilities)"
        )
    names = {tool.name for tool in request.tools}
    if request.tool_choice not in ("auto", "none", "required") and request.tool_choice not in (
        names
    ):
        raise ProviderError(
            "bad_request",
            f"tool_choice '{request.tool_choice}' is neither auto, required, none nor the name "
            f"of one of the request's tools ({', '.join(sorted(names)) or 'none given'})",
            provider=provider,
            model=request.model,
        )
    if request.tool_choice == "required" and not request.tools:
        raise ProviderError(
            "bad_request",
            "tool_choice 'required' needs tools, and the request has none",
            provider=provider,
            model=request.model,
        )
    effort = openai_effort(info, request.reasoning_effort)
    return effort


def strict_compatible(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts ``schema`` as it is: every object schema in it says
    ``additionalProperties: false`` and lists all its properties in ``required``."""
    if isinstance(schema, list):
        return all(strict_compatible(item) for item in schema)
    if not isinstance(schema, Mapping):
        return True
    types = schema.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types)
    properties = schema.get("properties")
    if is_object or isinstance(properties, Mapping):
        if schema.get("additionalProperties") is not False:
            return False
        if isinstance(properties, Mapping) and set(properties) - set(schema.get("required", ())):
            return False
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions", "patternProperties"):
            children = list(value.values()) if isinstance(value, Mapping) else []
        elif key in ("items", "prefixItems", "anyOf", "oneOf", "allOf", "not") or (
            key == "additionalProperties" and isinstance(value, Mapping)
        ):
            children = [value]
        else:
            continue
        if not all(strict_compatible(child) for child in children):
            return False
    return True


def tool_result_text(message: Message) -> str:
    return f"{ERROR_PREFIX}{message.content}" if message.is_error else message.content


def arguments_json(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def error_kind(code: object) -> ErrorKind:
    """The kind of an error the server reported inside a stream, from its code or type."""
    text = str(code or "").lower()
    if "rate_limit" in text:
        return "rate_limited"
    if "overloaded" in text or "slow_down" in text:
        return "overloaded"
    if "server_error" in text or "internal" in text:
        return "server_error"
    return "provider_error"


# -- the request -------------------------------------------------------------------------------


def request_params(
    request: ModelRequest, info: ModelInfo, *, provider: str, compatible: bool
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for ``request``."""
    effort = check_request(request, info, provider)
    params: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request),
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [_tool(tool.name, tool.description, tool.parameters, compatible)
                           for tool in request.tools]  # fmt: skip
        params["tool_choice"] = _tool_choice(request.tool_choice)
    if request.response_schema is not None:
        schema = dict(request.response_schema)
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": "response", "schema": schema, "strict": strict_compatible(schema),
            },
        }  # fmt: skip
    if effort is not None:
        params["reasoning_effort"] = effort
    if request.max_output_tokens is not None:
        key = "max_tokens" if compatible else "max_completion_tokens"
        params[key] = request.max_output_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.top_p is not None:
        params["top_p"] = request.top_p
    if request.stop:
        params["stop"] = list(request.stop)
    if request.options:
        params["extra_body"] = dict(request.options)
    return params


def _messages(request: ModelRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "user":
            messages.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.name, "arguments": arguments_json(call.arguments)}}
                    for call in message.tool_calls
                ]  # fmt: skip
            elif not message.content:
                entry["content"] = ""
            messages.append(entry)
        else:
            messages.append({"role": "tool", "tool_call_id": message.tool_call_id or "",
                             "content": tool_result_text(message)})  # fmt: skip
    return messages


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if not message.images:
        return message.content
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "text": message.content})
    parts.extend({"type": "image_url", "image_url": {"url": url}} for url in message.images)
    return parts


def _tool(
    name: str, description: str, parameters: Mapping[str, Any], compatible: bool
) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "parameters": dict(parameters)}
    if description:
        function["description"] = description
    if not compatible:  # OpenAI's own field; local servers may reject or ignore it
        function["strict"] = strict_compatible(parameters)
    return {"type": "function", "function": function}


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


# -- the stream --------------------------------------------------------------------------------

_STOP: dict[str, StopReason] = {
    "stop": "end",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


class ChatReader:
    """Reads ``chat.completion.chunk`` events: ``feed`` gives the deltas of one chunk,
    ``finished`` says whether a ``finish_reason`` came, ``response`` builds the answer."""

    def __init__(self, provider: str, request: ModelRequest) -> None:
        self._provider = provider
        self._request = request
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._refused = False
        self._calls = ToolCalls(provider, request.model)
        # the server's tool-call index -> (dhub index, id): a server that reuses an index
        # for another call (some local servers number every call 0) gets a new dhub index
        self._slots: dict[object, tuple[int, str | None]] = {}
        self._count = 0
        self._finish: str | None = None
        self._usage: CompletionUsage | None = None
        self._model: str | None = None

    @property
    def finished(self) -> bool:
        return self._finish is not None

    def feed(self, chunk: ChatCompletionChunk) -> Iterator[Delta]:
        if chunk.model:
            self._model = chunk.model
        if chunk.usage is not None:
            self._usage = chunk.usage
        for choice in chunk.choices or ():
            if choice.index not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                piece = _reasoning_piece(delta)
                if piece:
                    self._reasoning.append(piece)
                    yield ReasoningDelta(piece)
                if delta.content:
                    self._text.append(delta.content)
                    yield TextDelta(delta.content)
                if delta.refusal:
                    self._refused = True
                    self._text.append(delta.refusal)
                    yield TextDelta(delta.refusal)
                for call in delta.tool_calls or ():
                    function = call.function
                    fragment = ToolCallDelta(
                        self._slot(call.index, call.id),
                        id=call.id or None,
                        name=(function.name if function else None) or None,
                        arguments=(function.arguments if function else None) or "",
                    )
                    self._calls.add(fragment)
                    yield fragment
            if choice.finish_reason:
                self._finish = choice.finish_reason

    def _slot(self, index: object, call_id: str | None) -> int:
        slot = self._slots.get(index)
        if slot is None or (call_id and slot[1] and call_id != slot[1]):
            slot = (self._count, call_id)
            self._count += 1
        elif call_id and not slot[1]:
            slot = (slot[0], call_id)
        self._slots[index] = slot
        return slot[0]

    def response(self) -> ModelResponse:
        calls = self._calls.finish()
        stop = _STOP.get(self._finish or "", "end")
        if self._refused:
            stop = "refusal"
        elif calls and stop == "end":
            stop = "tool_calls"  # some local servers say "stop" after tool calls
        message = Message("assistant", "".join(self._text), calls,
                          reasoning="".join(self._reasoning))  # fmt: skip
        return ModelResponse(message, _usage(self._usage), stop, self._provider,
                             self._model or self._request.model)  # fmt: skip


def _reasoning_piece(delta: object) -> str:
    """The reasoning text of a delta: the first field that has some (servers in transition
    from ``reasoning_content`` to ``reasoning`` send the same text in both)."""
    for name in REASONING_FIELDS:
        piece = getattr(delta, name, None)
        if isinstance(piece, str) and piece:
            return piece
    return ""


def _usage(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage()
    prompt = usage.prompt_tokens_details
    completion = usage.completion_tokens_details
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        reasoning_tokens=(completion.reasoning_tokens or 0) if completion else 0,
        cached_tokens=(prompt.cached_tokens or 0) if prompt else 0,
    )
