"""Shared by the adapters: tool calls put together from their streamed fragments."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dhub.providers.errors import ProviderError
from dhub.providers.types import ToolCall, ToolCallDelta


@dataclass
class _Pending:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCalls:
    """Collects ``ToolCallDelta`` fragments by index; ``finish`` parses each call's JSON."""

    def __init__(self, provider: str, model: str) -> None:
        self._provider = provider
        self._model = model
        self._calls: dict[int, _Pending] = {}

    def add(self, delta: ToolCallDelta) -> None:
        call = self._calls.setdefault(delta.index, _Pending())
        if delta.id:
            call.id = delta.id
        if delta.name and not call.name:
            call.name = delta.name
        if delta.arguments:
            call.arguments.append(delta.arguments)

    def __bool__(self) -> bool:
        return bool(self._calls)

    def finish(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(call.id or f"call_{index}", call.name, self._parse(call))
            for index, call in sorted(self._calls.items())
        )

    def _parse(self, call: _Pending) -> dict[str, object]:
        text = "".join(call.arguments).strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            problem = f"is not valid JSON ({exc.msg} at {exc.pos})"
            raise self._malformed(call, problem, text) from None
        if not isinstance(value, dict):
            raise self._malformed(call, f"is JSON {type(value).__name__}, not an object", text)
        return value

    def _malformed(self, call: _Pending, problem: str, text: str) -> ProviderError:
        shown = text if len(text) <= 200 else text[:200] + "…"
        return ProviderError(
            "malformed_tool_call",
            f"the arguments of tool call '{call.name}' ({call.id or 'no id'}) {problem}: {shown}",
            provider=self._provider,
            model=self._model,
        )
