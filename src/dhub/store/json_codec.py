"""The JSON codec of every JSON column: orjson, several times faster than the stdlib's, which
the durable step writes spent a large share of their time in (bench/runs.py).

What orjson refuses (integers beyond 64 bits, say) falls back to the stdlib, so no value a
run produced can make its step unwritable. orjson writes non-finite floats (NaN, infinity) as
null: JSON has no such values, and PostgreSQL would refuse the stdlib's ``NaN``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, option=_OPTIONS).decode()
    except TypeError:
        # Marked by a leading space (JSON allows it; orjson never writes one): orjson would
        # read its integers beyond 64 bits back as floats, silently, so ``loads`` gives such
        # a text to the stdlib, found at no cost to every other text.
        return " " + json.dumps(value)


def loads(text: str | bytes) -> Any:
    if text[:1] in (" ", b" "):  # written by the stdlib (``dumps``)
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


# The options that make an engine or dialect use this codec for JSON columns.
ENGINE_OPTIONS = {"json_serializer": dumps, "json_deserializer": loads}
