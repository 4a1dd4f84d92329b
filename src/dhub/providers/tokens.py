"""Offline token counts (no tokenizer downloads): a calibrated estimate of model requests.

The base estimate of text is domain/tokens.py's. Each reply that reports real usage
calibrates it: the ratio of the provider's input count to the estimate is
kept per model (a moving average), so budgets follow the model's own tokenizer after the first
calls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from dhub.domain.memo import ByIdentity
from dhub.domain.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    TOOL_OVERHEAD,
    estimate_schema,
    estimate_text,
)
from dhub.providers.types import Message, ModelRequest, ToolSpec

__all__ = [
    "MESSAGE_OVERHEAD",
    "TOOL_OVERHEAD",
    "TokenCounter",
    "estimate_message",
    "estimate_messages",
    "estimate_request",
    "estimate_schema",
    "estimate_text",
    "estimate_tools",
]


def estimate_messages(messages: Iterable[Message], system: str = "") -> int:
    total = estimate_text(system) + (MESSAGE_OVERHEAD if system else 0)
    return total + sum(_message_tokens(message) for message in messages)


def estimate_message(message: Message) -> int:
    total = MESSAGE_OVERHEAD + estimate_text(message.content) + estimate_text(message.reasoning)
    total += IMAGE_TOKENS * len(message.images)
    for call in message.tool_calls:
        total += estimate_text(call.name) + estimate_text(json.dumps(call.arguments))
    return total


# A loop's messages are the same objects from call to call (runtime/model.py converts each
# once), and a Message is frozen.
_message_tokens = ByIdentity(estimate_message)


def estimate_tools(tools: Iterable[ToolSpec]) -> int:
    return sum(
        TOOL_OVERHEAD + estimate_text(t.name) + estimate_text(t.description)
        + estimate_schema(t.parameters)
        for t in tools
    )  # fmt: skip


def estimate_request(request: ModelRequest) -> int:
    """Input tokens of ``request`` by the base estimate."""
    total = estimate_messages(request.messages, request.system) + estimate_tools(request.tools)
    if request.response_schema:
        total += estimate_text(json.dumps(dict(request.response_schema)))
    return total


class TokenCounter:
    """Estimates calibrated per ``provider/model`` by the usage providers report."""

    def __init__(self, weight: float = 0.3) -> None:
        self._ratios: dict[str, float] = {}
        self._weight = weight

    def ratio(self, provider: str, model: str) -> float:
        return self._ratios.get(f"{provider}/{model}", 1.0)

    def count_request(self, provider: str, model: str, request: ModelRequest) -> int:
        return math.ceil(estimate_request(request) * self.ratio(provider, model))

    def count_text(self, provider: str, model: str, text: str) -> int:
        return math.ceil(estimate_text(text) * self.ratio(provider, model))

    def observe(self, provider: str, model: str, estimated: int, reported: int) -> None:
        """A reply's reported input tokens against the base estimate of its request."""
        if estimated < 16 or reported <= 0:
            return  # too small to say anything about the tokenizer
        key = f"{provider}/{model}"
        seen = reported / estimated
        old = self._ratios.get(key)
        self._ratios[key] = seen if old is None else old + self._weight * (seen - old)
