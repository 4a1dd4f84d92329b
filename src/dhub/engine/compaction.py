"""Keeping a react transcript inside its input-token budget (DESIGN.md 3.3). Pure.

Before each model call the system prompt, the tool definitions and the transcript are counted
(the offline estimate, scaled by what the provider reported for the previous call). Past
``trigger_ratio * budget`` the oldest *turns* go — a turn is a user message and everything up
to the next one, so a tool call is never parted from its result — never the system prompt and
never the last user turn, until the count is at most ``target_ratio * budget``. With
compaction enabled they are replaced by a summary the model writes (at most
``summary_max_tokens``), kept at the end of the system prompt (so no provider sees two user
messages in a row, and a later summary folds the earlier one in); disabled, they are dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dhub.domain.memo import ByIdentity
from dhub.domain.tokens import MESSAGE_OVERHEAD, TOOL_OVERHEAD, estimate_schema, estimate_text

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
SUMMARY_SYSTEM = (
    "You compress conversations. Summarize the conversation below for the assistant who will "
    "continue it: keep facts, names, numbers, decisions, what tools returned and what is "
    "still open; drop pleasantries. Write plain prose, no preamble."
)


@dataclass(frozen=True)
class Settings:
    """Compaction as it applies to one agent: its own values, else the server's defaults."""

    budget: int  # max_input_tokens, capped at the model's context window
    enabled: bool = True
    trigger_ratio: float = 0.8
    target_ratio: float = 0.5
    summary_max_tokens: int = 512


@dataclass(frozen=True)
class Cut:
    """What to compact: ``messages[:count]`` go (``count`` is at a turn boundary)."""

    count: int
    before: int  # tokens of the whole request before
    after: int  # tokens after, without a summary (a summary adds at most its maximum)


def _count_message(message: dict[str, Any]) -> int:
    total = MESSAGE_OVERHEAD + estimate_text(str(message.get("content") or ""))
    for call in message.get("tool_calls") or ():
        total += estimate_text(str(call.get("name", ""))) + estimate_text(
            json.dumps(call.get("arguments", {}), ensure_ascii=False)
        )
    return total


# A transcript's messages never change once in it, and a loop counts them before each call:
# each is counted once.
count_message = ByIdentity(_count_message)


def _count_tool(tool: dict[str, Any]) -> int:
    return (
        estimate_text(str(tool.get("name", ""))) + estimate_text(str(tool.get("description", "")))
        + estimate_schema(tool.get("parameters") or {})
    )  # fmt: skip


def count_request(
    system: str, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> int:
    """The base estimate of a request (uncalibrated)."""
    fixed = estimate_text(system) + MESSAGE_OVERHEAD
    fixed += sum(TOOL_OVERHEAD + _count_tool(t) for t in tools)
    return fixed + sum(count_message(m) for m in messages)


def turn_starts(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Where each turn begins: every user message that is not a tool result."""
    return [i for i, m in enumerate(messages) if m.get("role") == "user"]


def plan(
    system: str,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]],
    settings: Settings,
    ratio: float = 1.0,
) -> Cut | None:
    """The oldest turns to compact, or None when the request is under the trigger (or
    nothing but the last turn is left). ``ratio`` scales the estimate to the model's own
    tokenizer (reported input tokens / estimate, from the previous call)."""

    def scaled(n: int) -> int:
        return math.ceil(n * ratio)

    before = scaled(count_request(system, messages, tools))
    if before <= settings.trigger_ratio * settings.budget:
        return None
    starts = turn_starts(messages)
    if len(starts) < 2:
        return None
    target = settings.target_ratio * settings.budget
    if settings.enabled:
        target -= settings.summary_max_tokens + MESSAGE_OVERHEAD
    sizes = [scaled(count_message(m)) for m in messages]
    removed = 0
    cut = 0
    for start in starts[1:]:  # the last turn's start is the last candidate cut
        removed += sum(sizes[cut:start])
        cut = start
        if before - removed <= target:
            break
    return Cut(cut, before, before - removed)


def summary_request(
    messages: Sequence[dict[str, Any]], earlier: str | None
) -> list[dict[str, Any]]:
    """The summarizer's input: the earlier summary and the turns to compact as one text (tool
    calls and results written out, so no provider sees a call without its result)."""
    lines = [f"[summary of what came before] {earlier}"] if earlier else []
    for message in messages:
        role = message.get("role")
        content = str(message.get("content") or "")
        if role == "tool":
            lines.append(f"[tool result {message.get('tool_call_id', '')}] {content}")
            continue
        if content:
            lines.append(f"[{role}] {content}")
        for call in message.get("tool_calls") or ():
            arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
            lines.append(f"[{role} calls {call.get('name')} {call.get('id', '')}] {arguments}")
    return [{"role": "user", "content": "\n".join(lines)}]


def with_summary(system: str, summary: str | None) -> str:
    return f"{system}\n\n{SUMMARY_PREFIX}{summary}" if summary else system
