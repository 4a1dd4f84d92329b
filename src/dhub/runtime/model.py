"""The model port over the configured providers: an ``llm`` node's call as a provider request,
its deltas as live ``llm.delta`` events, its answer (text, or the parsed structured output)
and usage back to the engine."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

from dhub.domain.memo import ByIdentity
from dhub.engine.state import CallChat, CallModel
from dhub.observability import metrics
from dhub.providers.demo import NAME as DEMO
from dhub.providers.errors import ProviderError
from dhub.providers.registry import Providers
from dhub.providers.types import (
    Delta,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from dhub.runtime.ports import Live, ModelAnswer, PortError


class ProviderModel:
    """``complete`` calls the node's provider; a provider error fails the node with its kind,
    message, provider, model and status."""

    def __init__(self, providers: Providers) -> None:
        self.providers = providers
        # Each transcript message converted once per loop, not once per call: the engine
        # never changes a message that is in a transcript.
        self._messages: ByIdentity[dict[str, Any], Message] = ByIdentity(_message)

    async def complete(self, request: CallModel, live: Live | None = None) -> ModelAnswer:
        response = await self._call(request, model_request(request), live)
        value: Any = response.message.content
        if request.response_schema:
            value = response.parsed
        return _answer(value, await self._usage(request, response.usage), response)

    async def chat(self, request: CallChat, live: Live | None = None) -> ModelAnswer:
        response = await self._call(request, chat_request(request, self._messages), live)
        message = response.message
        value: dict[str, Any] = {
            "content": message.content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                           for c in message.tool_calls],
        }  # fmt: skip
        if message.reasoning:
            value["reasoning"] = message.reasoning
        if message.replay:
            value["replay"] = dict(message.replay)
        if request.response_schema is not None and not message.tool_calls:
            value["parsed"] = response.parsed
        return _answer(value, await self._usage(request, response.usage), response)

    async def _call(
        self, request: CallModel | CallChat, sent: ModelRequest, live: Live | None
    ) -> ModelResponse:
        """The provider's answer, counted (observability/metrics.py) as answered or failed
        by provider and model ("demo" when the demo model answers)."""
        provider, began = request.model_provider, time.perf_counter()
        model = DEMO if self.providers.is_demo(provider) else request.model
        try:
            client = self.providers.client(provider, request.model)
            response = await client.complete(sent, None if live is None else _relay(request, live))
        except ProviderError as exc:
            metrics.model_failed(provider, model, exc.kind, time.perf_counter() - began)
            raise PortError(exc.kind, str(exc), exc.details()) from exc
        except Exception:
            metrics.model_failed(provider, model, "crashed", time.perf_counter() - began)
            raise
        metrics.model_answered(provider, model, response.usage.as_json(),
                               time.perf_counter() - began)  # fmt: skip
        return response

    async def _usage(self, request: CallModel | CallChat, usage: Usage) -> dict[str, Any]:
        """The call's usage; ``"model": "demo"`` when the demo model answered (no provider
        configured by that name), so every event and view can say so. ``cost_usd`` is what it
        cost (providers/prices.py), priced now so the journal keeps it: None with a
        ``cost_note`` for a model without a known price."""
        counted = usage.as_json()
        if self.providers.is_demo(request.model_provider):
            counted["model"] = DEMO
        price = functools.partial(
            self.providers.cost, request.model_provider, request.model, counted
        )
        # The first look-up reads the price table: off the event loop, which it would stall.
        loaded = self.providers.prices.loaded
        cost, note = price() if loaded else await asyncio.to_thread(price)
        counted["cost_usd"] = cost
        if note is not None:
            counted["cost_note"] = note
        if cost is not None:
            metrics.model_cost(request.model_provider, counted.get("model", request.model), cost)
        return counted

    async def close(self) -> None:
        await self.providers.aclose()


def _answer(value: Any, usage: dict[str, Any], response: ModelResponse) -> ModelAnswer:
    return ModelAnswer(value, usage, response.stop_reason, response.model or None)


def model_request(request: CallModel) -> ModelRequest:
    return ModelRequest(
        model=request.model,
        messages=(Message("user", request.prompt),),
        system=request.system_prompt,
        response_schema=request.response_schema or None,
        reasoning_effort=request.reasoning_effort,  # type: ignore[arg-type]
    )


def chat_request(
    request: CallChat, convert: Callable[[dict[str, Any]], Message] | None = None
) -> ModelRequest:
    """A react loop's call: the transcript (JSON, as the engine keeps it) as messages, each
    through ``convert`` (by default converted anew; the model port remembers them)."""
    convert = convert or _message
    return ModelRequest(
        model=request.model,
        messages=tuple(convert(m) for m in request.messages),
        system=request.system,
        tools=tuple(ToolSpec(t["name"], t.get("description", ""), t.get("parameters") or
                             {"type": "object", "properties": {}}) for t in request.tools),
        response_schema=request.response_schema,
        reasoning_effort=request.reasoning_effort,  # type: ignore[arg-type]
        max_output_tokens=request.max_output_tokens,
        options=request.options or {},
    )  # fmt: skip


def _message(raw: dict[str, Any]) -> Message:
    calls = tuple(ToolCall(str(c["id"]), str(c["name"]), dict(c.get("arguments") or {}))
                  for c in raw.get("tool_calls") or ())  # fmt: skip
    return Message(
        role=raw["role"],
        content=str(raw.get("content") or ""),
        tool_calls=calls,
        tool_call_id=raw.get("tool_call_id"),
        is_error=bool(raw.get("is_error", False)),
        reasoning=str(raw.get("reasoning") or ""),
        replay=dict(raw.get("replay") or {}),
    )


def _relay(request: CallModel | CallChat, live: Live) -> Callable[[Delta], None]:
    base: dict[str, Any] = {"type": "llm.delta", "node_id": request.node_id,
                            "call": request.command_id}  # fmt: skip
    if request.frame:
        base["frame"] = request.frame
    if isinstance(request, CallChat) and request.path:
        base["delegate"] = request.path  # a role's loop, nested under its caller

    def relay(delta: Delta) -> None:
        if isinstance(delta, ToolCallDelta):
            live({**base, "kind": "tool_call", "index": delta.index, "id": delta.id,
                  "name": delta.name, "arguments": delta.arguments})  # fmt: skip
        else:
            live({**base, "kind": delta.type, "text": delta.text})

    return relay
