"""Offline token counts (no tokenizer downloads): a calibrated estimate.

The base estimate splits text the way BPE pre-tokenizers do (words with their leading space,
digit runs of up to three, punctuation runs) and charges a word of up to 10 characters one
token and a longer one a token per ~8 characters, punctuation a token per 2 characters, CJK a
token per character: rough (the tests hold it within 35% of hand counts). Each reply that
reports real usage calibrates it: the ratio of the provider's input count to the estimate is
kept per model (a moving average), so budgets follow the model's own tokenizer after the first
calls.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from dhub.providers.memo import ByIdentity
from dhub.providers.types import Message, ModelRequest, ToolSpec

_PIECES = re.compile(r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+""", re.UNICODE)
MESSAGE_OVERHEAD = 4  # role and separators of each message
TOOL_OVERHEAD = 8  # a tool definition's framing
IMAGE_TOKENS = 800  # a typical image's share, whatever its size


@functools.lru_cache(maxsize=8192)
def estimate_text(text: str) -> int:
    """Tokens in ``text`` by the base estimate. Remembered: a transcript is estimated again at
    every call of a loop (the budget, the calibration), and its messages do not change."""
    if not text:
        return 0
    count = 0
    for piece in _PIECES.findall(text):
        stripped = piece.strip()
        if not stripped:
            count += 1 if len(piece) > 1 or piece == "\n" else 0
        elif not (stripped[0].isalnum() or (stripped[0] == "'" and stripped[1:2].isalnum())):
            count += math.ceil(len(stripped) / 2)  # punctuation merges in pairs, roughly
        elif (wide := sum(1 for c in stripped if ord(c) >= 0x2E80)) > 0:
            # Scripts without spaces (CJK, ...) cost about a token per character.
            count += wide + _word(len(stripped) - wide)
        else:
            count += _word(len(stripped))
    return count


def _word(length: int) -> int:
    """Common words are one token; long ones split into pieces of ~8 characters."""
    if length == 0:
        return 0
    return 1 if length <= 10 else math.ceil(length / 8)


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


def _schema(schema: Mapping[str, Any]) -> int:
    return estimate_text(json.dumps(dict(schema)))


# A tool's parameters are the same (unchanging) schema at every call of a loop.
estimate_schema = ByIdentity(_schema)


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
