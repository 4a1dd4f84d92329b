"""Offline token estimates of text and JSON schemas (no tokenizer): the base estimate that
providers/tokens.py calibrates per model and the engine's compaction budgets with. Pure.

The estimate splits text the way BPE pre-tokenizers do (words with their leading space, digit
runs of up to three, punctuation runs) and charges a word of up to 10 characters one token and
a longer one a token per ~8 characters, punctuation a token per 2 characters, CJK a token per
character: rough (the tests hold it within 35% of hand counts).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from dhub.domain.memo import ByIdentity

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


def _schema(schema: Mapping[str, Any]) -> int:
    return estimate_text(json.dumps(dict(schema)))


# A tool's parameters are the same (unchanging) schema at every call of a loop.
estimate_schema = ByIdentity(_schema)
