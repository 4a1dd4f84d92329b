"""The expression language (DESIGN.md 3.1), pure: no I/O."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dhub.engine.expressions import ExpressionError, Expressions, Where

W = Where("node_a", "prompt")


@pytest.fixture(scope="module")
def ex() -> Expressions:
    return Expressions()


def test_one_block_is_a_native_value(ex: Expressions) -> None:
    scope = {"numbers": [1, 2, 3], "nodes": {"each": {"results": [{"sq": 1}]}}, "flag": False}
    assert ex.value("{{ numbers }}", scope, W) == [1, 2, 3]
    assert ex.value("  {{ numbers | length }}  ", scope, W) == 3
    assert ex.value("{{ nodes.each.results }}", scope, W) == [{"sq": 1}]
    assert ex.value("{{ flag }}", scope, W) is False
    assert ex.value("{{ false }}", {}, W) is False
    assert ex.value("{{ {'a': numbers[0]} }}", scope, W) == {"a": 1}


def test_other_strings_render_and_literals_pass(ex: Expressions) -> None:
    scope = {"index": 0, "sq": 4}
    assert ex.value("#{{ index }}: {{ sq }}", scope, W) == "#0: 4"
    assert ex.value("{{ index }}{{ sq }}", scope, W) == "04"  # two blocks: text
    assert ex.value("plain text", scope, W) == "plain text"
    assert ex.value(42, scope, W) == 42
    assert ex.value({"a": "{{ index }}"}, scope, W) == {"a": "{{ index }}"}  # literals stay


def test_templates(ex: Expressions) -> None:
    rows = {"rows": [{"line": "#0: 1"}, {"line": "#1: 4"}]}
    loop = "{% for r in rows %}{{ r.line }}\n{% endfor %}"
    assert ex.template(loop, rows, W) == "#0: 1\n#1: 4\n"
    alert = {"alert": {"msg": "<b>&'"}}
    assert ex.template("{{ alert | tojson }}", alert, W) == '{"msg": "<b>&\'"}'  # not HTML-escaped
    assert ex.template("{{ missing | default('n/a') }}", {}, W) == "n/a"
    assert ex.template("{{ '{\"a\": 1}' | fromjson }}", {}, W) == "{'a': 1}"


def test_conditions(ex: Expressions) -> None:
    assert ex.condition("urgent", {"urgent": True}, W) is True
    assert ex.condition("count > 2 and not done", {"count": 3, "done": False}, W) is True
    assert ex.condition("{{ items | length == 0 }}", {"items": [1]}, W) is False
    assert ex.condition("name", {"name": ""}, W) is False


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("{{ missing }}", "missing"),
        ("Hello {{ missing }}", "missing"),
        ("{{ [1, missing] }}", "missing"),
        ("{{ {'k': missing} }}", "missing"),
        ("{{ known.absent }}", "absent"),
    ],
)
def test_undefined_names_are_errors_naming_node_field_and_name(
    ex: Expressions, source: str, name: str
) -> None:
    with pytest.raises(ExpressionError) as caught:
        ex.value(source, {"known": {}}, W)
    assert caught.value.code == "undefined"
    assert caught.value.name == name
    assert (
        "node_a" in str(caught.value)
        and "prompt" in str(caught.value)
        and name in str(caught.value)
    )


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ (1).__class__.__bases__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ f.__globals__ }}",
        "{{ x.__dict__ }}",
    ],
)
def test_python_internals_are_out_of_reach(ex: Expressions, source: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        ex.value(source, {"f": len, "x": Where("a", "b")}, W)
    assert caught.value.code in ("unsafe", "undefined")


def test_syntax_and_runtime_errors(ex: Expressions) -> None:
    for source, code in (
        ("{{ x +* }}", "syntax"),
        ("{% for %}", "syntax"),
        ("{{ 1 / 0 }}", "error"),
    ):
        with pytest.raises(ExpressionError) as caught:
            ex.value(source, {"x": 1}, W)
        assert caught.value.code == code
    with pytest.raises(ExpressionError):
        ex.condition("", {}, W)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values)
def test_a_named_value_comes_back_unchanged(value: Any) -> None:
    assert Expressions().value("{{ v }}", {"v": value}, W) == value


@given(st.text(alphabet=st.characters(blacklist_characters="{}%#"), max_size=40))
def test_text_without_markup_renders_as_itself(text: str) -> None:
    assert Expressions().value(text, {}, W) == text
