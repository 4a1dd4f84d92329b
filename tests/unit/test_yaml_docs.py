"""The YAML writer and reader are each other's inverse on JSON data (and the writer's output reads
the same with ``yaml.safe_load``, which clients and the CLI use): any text, numbers at the edges
of exactness, key order."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dhub.domain.bounds import INT64_MAX, INT64_MIN
from dhub.domain.yaml_docs import dump, load

text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"))
# Text that reads as something else, or that block or plain styles would change.
tricky = st.sampled_from(["yes", "No", "on", "~", "null", "1e3", "0o17", "0x1F", "1_000", ".5",
                          "2024-05-01", "12:30:00", "<<", "=", "- a", "a: b", "#x", "'", '"', "",
                          " ", "\n", "a\n", " a\nb", "a \nb", "a\r\nb", "\t", "\u2028", "\x85\n",
                          "\ufeffa", "---", "...", "? a", "!tag", "&a", "*a", "%YAML"])  # fmt: skip
scalars = (
    st.none() | st.booleans() | st.integers(INT64_MIN, INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False) | text | tricky
)  # fmt: skip
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text | tricky, inner, max_size=4),
    max_leaves=25,
)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and json.dumps(a) == json.dumps(b)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_dump_then_load_gives_the_value_back(value: Any) -> None:
    written = dump(value)
    assert same(load(written), value), written


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(text, json_values, max_size=6))
def test_safe_load_reads_the_same_value(value: Any) -> None:
    import yaml

    assert same(yaml.safe_load(dump(value)), value)
