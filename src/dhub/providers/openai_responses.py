"""OpenAI Responses API for ``OpenAIAdapter`` (``dhub.providers.openai``): the request body and
a reader that turns the response event stream into dhub stream items.

Nothing is stored at OpenAI (``store: false``): every turn sends the whole conversation, and a
reasoning model's reasoning items (with their ``encrypted_content``) travel in the assistant
message's ``replay["openai_responses"]`` and are sent back before its function calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseRefusalDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)

from dhub.providers.assemble import ToolCalls
from dhub.providers.catalog import ModelInfo
from dhub.providers.errors import ProviderError, UnsupportedFeature
from dhub.providers.openai_chat import (
    arguments_json,
    check_request,
    error_kind,
    strict_compatible,
    tool_result_text,
)
from dhub.providers.types import (
    Delta,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StopReason,
    TextDelta,
    ToolCallDelta,
    Usage,
)

REPLAY_KEY = "openai_responses"  # Message.replay key: the reasoning items, as JSON objects


# -- the request -------------------------------------------------------------------------------


def request_params(request: ModelRequest, info: ModelInfo, *, provider: str) -> dict[str, Any]:
    """The keyword arguments of ``responses.create`` for ``request``."""
    effort = check_request(request, info, provider)
    if request.stop:
        raise UnsupportedFeature(
            "the Responses API has no stop sequences, and this model is served through it; "
            "remove stop",
            provider=provider,
            model=request.model,
        )
    params: dict[str, Any] = {"model": request.model, "input": _input(request), "store": False}
    if request.system:
        params["instructions"] = request.system
    if request.tools:
        params["tools"] = [
            {"type": "function", "name": tool.name,
             **({"description": tool.description} if tool.description else {}),
             "parameters": dict(tool.parameters), "strict": strict_compatible(tool.parameters)}
            for tool in request.tools
        ]  # fmt: skip
        choice = request.tool_choice
        params["tool_choice"] = (
            choice
            if choice in ("auto", "none", "required")
            else {"type": "function", "name": choice}
        )
    if request.response_schema is not None:
        schema = dict(request.response_schema)
        params["text"] = {
            "format": {"type": "json_schema", "name": "response", "schema": schema,
                       "strict": strict_compatible(schema)},
        }  # fmt: skip
    if info.reasoning:
        reasoning: dict[str, Any] = {"summary": "auto"}
        if effort is not None:
            reasoning["effort"] = effort
        params["reasoning"] = reasoning
        params["include"] = ["reasoning.encrypted_content"]
    if request.max_output_tokens is not None:
        params["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.top_p is not None:
        params["top_p"] = request.top_p
    if request.options:
        params["extra_body"] = dict(request.options)
    return params


def _input(request: ModelRequest) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "user":
            content: list[dict[str, Any]] = []
            if message.content or not message.images:
                content.append({"type": "input_text", "text": message.content})
            content.extend({"type": "input_image", "image_url": url, "detail": "auto"}
                           for url in message.images)  # fmt: skip
            items.append({"role": "user", "content": content})
        elif message.role == "assistant":
            replay = message.replay.get(REPLAY_KEY) or ()
            items.extend(dict(item) for item in replay if isinstance(item, Mapping))
            if message.content or not message.tool_calls:
                items.append({"role": "assistant", "content": message.content})
            items.extend(
                {"type": "function_call", "call_id": call.id, "name": call.name,
                 "arguments": arguments_json(call.arguments)}
                for call in message.tool_calls
            )  # fmt: skip
        else:
            items.append({"type": "function_call_output", "call_id": message.tool_call_id or "",
                          "output": tool_result_text(message)})  # fmt: skip
    return items


# -- the stream --------------------------------------------------------------------------------


class ResponsesReader:
    """Reads Responses API stream events: ``feed`` gives the deltas of one event (raising
    ``ProviderError`` for an error event), ``finished`` says whether the response completed
    (or ended incomplete), ``response`` builds the answer."""

    def __init__(self, provider: str, request: ModelRequest) -> None:
        self._provider = provider
        self._request = request
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._summary: tuple[str, int] | None = None  # the summary part being streamed
        self._refused = False
        self._calls = ToolCalls(provider, request.model)
        self._slots: dict[int, int] = {}  # output_index -> dhub tool-call index
        self._with_arguments: set[int] = set()  # dhub indexes that got argument text
        self._replay: list[dict[str, Any]] = []
        self._final: Response | None = None
        self._model: str | None = None

    @property
    def finished(self) -> bool:
        return self._final is not None

    def feed(self, event: ResponseStreamEvent) -> Iterator[Delta]:
        if isinstance(event, ResponseTextDeltaEvent):
            if event.delta:
                self._text.append(event.delta)
                yield TextDelta(event.delta)
        elif isinstance(event, ResponseReasoningSummaryTextDeltaEvent):
            if event.delta:
                part = (event.item_id, event.summary_index)
                text = event.delta
                if self._summary not in (None, part) and self._reasoning:
                    text = "\n\n" + text  # a new summary part
                self._summary = part
                self._reasoning.append(text)
                yield ReasoningDelta(text)
        elif isinstance(event, ResponseReasoningTextDeltaEvent):
            if event.delta:
                self._reasoning.append(event.delta)
                yield ReasoningDelta(event.delta)
        elif isinstance(event, ResponseRefusalDeltaEvent):
            if event.delta:
                self._refused = True
                self._text.append(event.delta)
                yield TextDelta(event.delta)
        elif isinstance(event, ResponseOutputItemAddedEvent):
            item = event.item
            if isinstance(item, ResponseFunctionToolCall):
                yield from self._call(event.output_index, item)
        elif isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
            if event.delta:
                index = self._slot(event.output_index)
                self._with_arguments.add(index)
                fragment = ToolCallDelta(index, arguments=event.delta)
                self._calls.add(fragment)
                yield fragment
        elif isinstance(event, ResponseOutputItemDoneEvent):
            item = event.item
            if isinstance(item, ResponseFunctionToolCall):
                yield from self._call(event.output_index, item)
            elif isinstance(item, ResponseReasoningItem):
                self._replay.append(item.model_dump(mode="json", exclude_none=True))
        elif isinstance(event, ResponseCreatedEvent | ResponseInProgressEvent):
            self._model = event.response.model or self._model
        elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
            self._final = event.response
            self._model = event.response.model or self._model
        elif isinstance(event, ResponseFailedEvent):
            error = event.response.error
            raise self._error(
                error.code if error else None,
                error.message if error else "the response failed (no reason given)",
            )
        elif isinstance(event, ResponseErrorEvent):
            raise self._error(event.code, event.message)

    def _slot(self, output_index: int) -> int:
        if output_index not in self._slots:
            self._slots[output_index] = len(self._slots)
        return self._slots[output_index]

    def _call(self, output_index: int, item: ResponseFunctionToolCall) -> Iterator[Delta]:
        """A function call item, when it starts (``added``) and when it is done: its id and
        name, and its arguments when no delta brought them (servers that send them whole)."""
        first = output_index not in self._slots
        index = self._slot(output_index)
        arguments = ""
        if item.arguments and index not in self._with_arguments:
            arguments = item.arguments
            self._with_arguments.add(index)
        if first or arguments:
            fragment = ToolCallDelta(
                index,
                id=(item.call_id or None) if first else None,  # id and name: first fragment only
                name=(item.name or None) if first else None,
                arguments=arguments,
            )
            self._calls.add(fragment)
            yield fragment

    def _error(self, code: object, message: str) -> ProviderError:
        return ProviderError(error_kind(code), message or "the server reported an error",
                             provider=self._provider, model=self._request.model)  # fmt: skip

    def response(self) -> ModelResponse:
        final = self._final
        calls = self._calls.finish()
        reason = final.incomplete_details.reason if final and final.incomplete_details else None
        stop: StopReason = "end"
        if self._refused:
            stop = "refusal"
        elif reason == "max_output_tokens":
            stop = "max_tokens"
        elif reason == "content_filter":
            stop = "content_filter"
        elif calls:
            stop = "tool_calls"
        replay = self._replay
        if not replay and final is not None:  # no output_item.done events: the final output
            replay = [item.model_dump(mode="json", exclude_none=True)
                      for item in final.output or () if isinstance(item, ResponseReasoningItem)]  # fmt: skip  # noqa: E501
        message = Message(
            "assistant", "".join(self._text), calls, reasoning="".join(self._reasoning),
            replay={REPLAY_KEY: replay} if replay else {},
        )  # fmt: skip
        return ModelResponse(message, _usage(final.usage if final else None), stop,
                             self._provider, self._model or self._request.model)  # fmt: skip


def _usage(usage: ResponseUsage | None) -> Usage:
    if usage is None:
        return Usage()
    cached = usage.input_tokens_details
    reasoning = usage.output_tokens_details
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        reasoning_tokens=(reasoning.reasoning_tokens or 0) if reasoning else 0,
        cached_tokens=(cached.cached_tokens or 0) if cached else 0,
    )
