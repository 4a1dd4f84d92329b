"""The bounds checker of request bodies (domain/bounds.py), property-tested: a random JSON
document is accepted exactly when it is within the bounds, and what is accepted round-trips
through the store's JSON codec and the response encoder unchanged."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dhub.api.responses import encode
from dhub.domain.bounds import (
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    parameter_problems,
    parse_document,
)
from dhub.domain.errors import InvalidInput
from dhub.store import json_codec

# Integers around the 64-bit edges and far beyond, strings that may hold NUL.
integers = st.one_of(
    st.integers(-1000, 1000),
    st.integers(INT64_MIN - 3, INT64_MIN + 3),
    st.integers(INT64_MAX - 3, INT64_MAX + 3),
    st.integers(2**64 - 2, 2**64 + 2),
    st.integers(-(2**80), 2**80),
)
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
scalars = st.one_of(
    st.none(), st.booleans(), integers, st.floats(allow_nan=False, allow_infinity=False), texts
)


@st.composite
def deep(draw: st.DrawFn) -> Any:
    """A chain of lists and objects nesting around the depth limit, a scalar at its end and
    maybe another beside one of its links."""
    kinds = draw(st.lists(st.booleans(), min_size=MAX_DEPTH - 2, max_size=MAX_DEPTH + 2))
    value = draw(scalars)
    sibling = draw(st.integers(0, len(kinds)))
    extra = draw(scalars)
    for level, is_list in enumerate(kinds):
        if is_list:
            value = [value, extra] if level == sibling else [value]
        else:
            value = {"k": value, "s": extra} if level == sibling else {"k": value}
    return value


documents = st.one_of(
    st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(texts, c, max_size=3),
                 max_leaves=20),
    deep(),
)  # fmt: skip


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def within_bounds(value: Any) -> bool:
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return True
    if isinstance(value, int):
        return INT64_MIN <= value <= INT64_MAX
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, list):
        return all(within_bounds(v) for v in value)
    return all("\x00" not in k and within_bounds(v) for k, v in value.items())


@given(documents)
@settings(max_examples=400, deadline=None)
def test_a_document_is_accepted_iff_within_bounds(doc: Any) -> None:
    raw = json.dumps(doc).encode()  # the stdlib writes any integer, as a client may
    expected = depth(doc) <= MAX_DEPTH and within_bounds(doc)
    if not expected:
        with pytest.raises(InvalidInput) as caught:
            parse_document(raw)
        assert all(e.loc.startswith("/") or e.loc == "" for e in caught.value.errors)
        return
    parsed = parse_document(raw)
    assert parsed == doc  # every number exactly as sent
    stored = json_codec.dumps(parsed)
    assert json_codec.loads(stored) == doc
    assert orjson.loads(encode({"data": [{"value": parsed}]})) == {"data": [{"value": doc}]}
    assert orjson.dumps(parsed)  # the fast encoder itself can write it (no fallback needed)


def test_problems_point_at_the_value() -> None:
    doc = {"a": [1, {"b": "x\x00"}], "big": 2**64, "k\x00": 1, "ok": 2**63 - 1}
    with pytest.raises(InvalidInput) as caught:
        parse_document(json.dumps(doc).encode())
    by_loc = {e.loc: e.code for e in caught.value.errors}
    assert by_loc == {
        "/a/1/b": "nul",
        "/big": "integer_out_of_range",
        "/k\x00": "nul",
    }


def test_too_deep_is_refused_at_the_first_level_too_deep() -> None:
    doc: Any = 1
    for _ in range(MAX_DEPTH + 1):
        doc = [doc]
    with pytest.raises(InvalidInput) as caught:
        parse_document(json.dumps(doc).encode())
    [error] = caught.value.errors
    assert error.code == "too_deep"
    assert error.loc == "/0" * MAX_DEPTH
    parse_document(json.dumps(doc[0]).encode())  # one level less is fine


@pytest.mark.parametrize(
    "raw",
    [b"[" * 2000 + b"]" * 2000, b"1e400", b'"\\ud800"', b"\xff", b"", b"[1,]", b"NaN"],
)
def test_what_is_not_json_is_refused(raw: bytes) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_document(raw)
    assert [e.loc for e in caught.value.errors] == [""]


def test_an_integer_literal_beyond_64_bits_is_refused_not_rounded() -> None:
    # orjson reads 2**64 as the float 1.8446744073709552e19; the checker reads it exactly.
    with pytest.raises(InvalidInput) as caught:
        parse_document(b'{"n": [18446744073709551616]}')
    assert [e.loc for e in caught.value.errors] == ["/n/0"]
    assert parse_document(b'{"n": 1.8446744073709552e19}') == {"n": 1.8446744073709552e19}


def test_parameters() -> None:
    assert parameter_problems("query", "q", "x" * 500) == []
    [long] = parameter_problems("query", "q", "x" * 501)
    assert (long.loc, long.code) == ("/query/q", "too_long")
    [nul] = parameter_problems("path", "agent_id", "agent.\x00")
    assert (nul.loc, nul.code) == ("/path/agent_id", "nul")
    assert parameter_problems("header", "user-agent", "x" * 5000) == []
