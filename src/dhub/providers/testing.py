"""Test models, shipped for users' own tests (and offline demos): no network, no keys.

``ScriptedModel`` answers each request with the next reply of a list; ``FunctionModel`` asks a
Python function for each reply. Both are ``ModelProvider`` s: they stream their replies as
deltas (word by word) through the same client as a real provider, so retries, structured
output, usage and ``llm.delta`` events behave as in production. Both record every request.

A reply is text; a ``Reply`` (text, tool calls, reasoning, usage); a JSON value (dict or list)
for structured output, sent as its JSON text; or an exception to raise. In JSON (the providers
file, ``dhub run --model-replies``) an object whose keys are among ``text``, ``tool_calls`` and
``reasoning``, with ``tool_calls`` among them, is a ``Reply``: ``{"text": "…", "tool_calls":
[{"name": "lookup", "arguments": {…}}]}``.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dhub.providers.errors import ProviderError
from dhub.providers.types import (
    Finished,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StopReason,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``tool_calls`` items are ``ToolCall`` s or ``{"name",
    "arguments", "id"?}`` mappings; ``usage`` None lets dhub estimate it."""

    text: str = ""
    tool_calls: Sequence[ToolCall | Mapping[str, Any]] = ()
    reasoning: str = ""
    usage: Usage | None = None
    stop_reason: StopReason | None = None
    calls: tuple[ToolCall, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        calls = tuple(
            c if isinstance(c, ToolCall)
            else ToolCall(str(c.get("id") or f"call_{i}"), str(c["name"]),
                          dict(c.get("arguments") or {}))
            for i, c in enumerate(self.tool_calls)
        )  # fmt: skip
        object.__setattr__(self, "calls", calls)


ReplyLike = Reply | str | dict[str, Any] | list[Any] | BaseException


def as_reply(value: Any) -> Reply | BaseException:
    """A script item as a ``Reply`` (or the exception it is)."""
    if isinstance(value, Reply | BaseException):
        return value
    if isinstance(value, str):
        return Reply(value)
    if isinstance(value, dict) and "tool_calls" in value and set(value) <= {
        "text", "tool_calls", "reasoning",
    }:  # fmt: skip
        return Reply(str(value.get("text") or ""), list(value["tool_calls"]),
                     str(value.get("reasoning") or ""))  # fmt: skip
    return Reply(json.dumps(value))


class _TestModel:
    name: str

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: list[ModelRequest] = []

    async def _reply(self, request: ModelRequest) -> Reply | BaseException:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        reply = await self._reply(request)
        if isinstance(reply, BaseException):
            raise reply
        for piece in _WORDS.findall(reply.reasoning):
            yield ReasoningDelta(piece)
        for piece in _WORDS.findall(reply.text):
            yield TextDelta(piece)
        for index, call in enumerate(reply.calls):
            yield ToolCallDelta(index, call.id, call.name, json.dumps(call.arguments))
        message = Message("assistant", reply.text, reply.calls, reasoning=reply.reasoning)
        stop: StopReason = reply.stop_reason or ("tool_calls" if reply.calls else "end")
        yield Finished(
            ModelResponse(message, reply.usage or Usage(), stop, self.name, request.model)
        )

    async def aclose(self) -> None:
        pass


class ScriptedModel(_TestModel):
    """Answers with ``replies`` in order; running out fails the call clearly."""

    def __init__(self, replies: Iterable[ReplyLike], name: str = "scripted") -> None:
        super().__init__(name)
        self.replies = [as_reply(r) for r in replies]
        self.answered = 0

    async def _reply(self, request: ModelRequest) -> Reply | BaseException:
        if self.answered >= len(self.replies):
            raise ProviderError(
                "provider_error",
                f"the scripted model has no reply left (it answered {self.answered} "
                f"request(s)); add replies to its script",
                provider=self.name,
                model=request.model,
            )
        self.answered += 1
        return self.replies[self.answered - 1]


ReplyFunction = Callable[[ModelRequest], ReplyLike | Awaitable[ReplyLike]]


class FunctionModel(_TestModel):
    """Asks ``function(request)`` (sync or async) for each reply."""

    def __init__(self, function: ReplyFunction, name: str = "function") -> None:
        super().__init__(name)
        self.function = function

    async def _reply(self, request: ModelRequest) -> Reply | BaseException:
        value = self.function(request)
        if inspect.isawaitable(value):
            value = await value
        return as_reply(value)
