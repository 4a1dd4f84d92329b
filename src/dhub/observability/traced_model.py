"""Model calls of a traced run (traces.py): each a ``chat {model}`` span with the GenAI
semantic conventions' attributes, prompts and completions only when capture is on."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from dhub.engine.state import CallChat, CallModel
from dhub.runtime.ports import Live, ModelAnswer, ModelPort, PortError

if TYPE_CHECKING:
    from dhub.observability.traces import RunTrace


class TracedModel:
    """The model port of one traced execution: each call a ``chat {model}`` span (GenAI
    semantic conventions) under its node's span, current while it runs (so the provider's
    HTTP request is its child)."""

    def __init__(self, inner: ModelPort, run: RunTrace) -> None:
        self.inner = inner
        self.run = run

    async def complete(self, request: CallModel, live: Live | None = None) -> ModelAnswer:
        return await self._call(request, lambda: self.inner.complete(request, live))

    async def chat(self, request: CallChat, live: Live | None = None) -> ModelAnswer:
        return await self._call(request, lambda: self.inner.chat(request, live))

    async def _call(
        self, request: CallModel | CallChat, call: Callable[[], Awaitable[ModelAnswer]]
    ) -> ModelAnswer:
        run = self.run
        if not run.recording:
            return await call()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": request.model_provider,
            "gen_ai.system": request.model_provider,
            "gen_ai.request.model": request.model,
            "dhub.node.id": request.node_id,
        }
        if (node_type := run.node_type(request.node_id)) == "llm":  # the node's span (_quiet)
            attributes["dhub.node.type"] = node_type
            if request.frame:
                attributes["dhub.node.frame"] = request.frame
            parent = run.parent_of(request.frame)
        else:
            parent = trace.set_span_in_context(run.node_span(request.frame, request.node_id))
        if isinstance(request, CallChat) and request.path:
            attributes["dhub.delegate"] = request.path
        if run.capture:
            attributes.update(_prompt(request))
        with run.tracer.start_as_current_span(
            f"chat {request.model}", context=parent, kind=SpanKind.CLIENT,
            attributes=attributes, record_exception=False, set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                answer = await call()
            except PortError as exc:
                span.set_attribute("error.type", exc.kind)
                span.set_status(Status(StatusCode.ERROR, exc.message[:500]))
                raise
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
                raise
            _answered(span, request, answer, run.capture)
            return answer


def _answered(
    span: Span, request: CallModel | CallChat, answer: ModelAnswer, capture: bool
) -> None:
    usage = answer.usage or {}
    span.set_attribute("gen_ai.response.model", answer.response_model or request.model)
    usage_attributes(span, usage)
    reason = _REASONS.get(answer.finish_reason or "", "") or _finish_reason(answer.value)
    span.set_attribute("gen_ai.response.finish_reasons", [reason])
    if capture:
        span.set_attribute("gen_ai.output.messages", json_text([_output(answer.value, reason)]))


def usage_attributes(span: Span, usage: Mapping[str, Any]) -> None:
    """Tokens as the GenAI conventions name them, and the cost dhub priced (USD)."""
    for name in ("input_tokens", "output_tokens"):
        if isinstance(usage.get(name), int):
            span.set_attribute(f"gen_ai.usage.{name}", usage[name])
    if isinstance(usage.get("cost_usd"), int | float):
        span.set_attribute("dhub.cost_usd", float(usage["cost_usd"]))


# dhub's stop reasons (providers/types.py) as the GenAI conventions name them
_REASONS = {"end": "stop", "tool_calls": "tool_calls", "max_tokens": "length",
            "content_filter": "content_filter", "refusal": "content_filter"}  # fmt: skip


def _finish_reason(value: Any) -> str:
    return "tool_calls" if isinstance(value, dict) and value.get("tool_calls") else "stop"


def _prompt(request: CallModel | CallChat) -> dict[str, str]:
    """Prompt content as the GenAI conventions' JSON attributes (DHUB_OTEL_CAPTURE_CONTENT)."""
    if isinstance(request, CallModel):
        system, messages = request.system_prompt, [{"role": "user", "content": request.prompt}]
    else:
        system, messages = request.system, request.messages
    shown = {"gen_ai.input.messages": json_text([_message(m) for m in messages])}
    if system:
        shown["gen_ai.system_instructions"] = json_text([{"type": "text", "content": system}])
    return shown


def _message(raw: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if raw.get("content"):
        kind = "tool_call_response" if raw.get("role") == "tool" else "text"
        part: dict[str, Any] = {"type": kind, "content": raw["content"]}
        if raw.get("tool_call_id"):
            part["id"] = raw["tool_call_id"]
        parts.append(part)
    for call in raw.get("tool_calls") or ():
        parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                      "arguments": call.get("arguments")})  # fmt: skip
    return {"role": raw.get("role"), "parts": parts}


def _output(value: Any, reason: str) -> dict[str, Any]:
    if isinstance(value, dict) and ("content" in value or "tool_calls" in value):
        message = _message({"role": "assistant", **value})
    else:
        text = value if isinstance(value, str) else json_text(value)
        message = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    return {**message, "finish_reason": reason}


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
