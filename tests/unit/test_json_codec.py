"""The JSON codec of stored columns reads back what the stdlib would, for every JSON value."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dhub.store import json_codec

scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: orjson refuses them, the fallback takes them
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(values)
def test_a_value_reads_back_as_the_stdlib_would(value: Any) -> None:
    assert json_codec.loads(json_codec.dumps(value)) == json.loads(json.dumps(value))


def test_what_orjson_refuses_still_round_trips() -> None:
    big = {"n": 2**80, "neg": -(2**70)}
    assert json_codec.loads(json_codec.dumps(big)) == big
    assert json_codec.loads('{"x": NaN}')["x"] != 0  # the stdlib's NaN is still read
    assert math.isnan(json_codec.loads('{"x": NaN}')["x"])


def test_non_finite_floats_are_stored_as_null() -> None:
    assert json_codec.loads(json_codec.dumps({"x": math.inf})) == {"x": None}
