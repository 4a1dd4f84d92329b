"""The template language of Template resources (domain/documents.py), pure: what a save
refuses, how values are checked, what the sandbox and its bounds stop, and escaping, with
Hypothesis where the inputs are free text."""

from __future__ import annotations

import datetime as dt
import sys
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import escape

from dhub.domain.documents import (
    MAX_OUTPUT,
    RenderError,
    TemplateVariable,
    body_problems,
    check_values,
    file_name,
    is_template_id,
    render,
    variable_problems,
)


def var(name: str, kind: str = "string", **extra: Any) -> TemplateVariable:
    return TemplateVariable.model_validate({"name": name, "type": kind, **extra})


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_html_escapes_any_text_and_the_others_keep_it(value: str) -> None:
    assert render("{{ v }}", "html", {"v": value}) == str(escape(value))
    assert render("{{ v }}", "text", {"v": value}) == value
    assert render("{{ v }}", "markdown", {"v": value}) == value


@given(st.text(max_size=60).filter(lambda s: "{" not in s and "%" not in s and "#" not in s))
@settings(max_examples=100, deadline=None)
def test_text_without_markup_renders_as_itself(body: str) -> None:
    """(Line ends become \n, as Jinja writes them.)"""
    assert body_problems(body, "text", []) == []
    assert render(body, "text", {}) == body.replace("\r\n", "\n").replace("\r", "\n")


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_integers_pass_and_other_types_are_named(value: int) -> None:
    declared = [var("n", "integer")]
    assert check_values(declared, {"n": value}) == {"n": value}
    assert check_values(declared, {"n": float(value)}) == {"n": value}
    for wrong in (str(value), True, [value], value + 0.5):
        with pytest.raises(RenderError) as caught:
            check_values(declared, {"n": wrong})
        assert caught.value.variable == "n" and caught.value.code == "wrong_type"


def test_dates_become_dates() -> None:
    declared = [var("d", "date"), var("t", "datetime")]
    values = check_values(declared, {"d": "2026-02-28", "t": "2026-02-28T09:30:00Z"})
    assert values == {
        "d": dt.date(2026, 2, 28),
        "t": dt.datetime(2026, 2, 28, 9, 30, tzinfo=dt.UTC),
    }
    assert render("{{ d.strftime('%d %B') }} {{ t.hour }}", "text", values) == "28 February 9"
    for bad in ("2026-02-30", "28/02/2026", "2026-02-28T09:30:00Z"):
        with pytest.raises(RenderError, match="'d' must be a date"):
            check_values(declared, {"d": bad, "t": "2026-02-28T09:30"})


def test_defaults_and_optional_values() -> None:
    declared = [var("a"), var("b", default="x"), var("c", required=False)]
    assert check_values(declared, {"a": "1"}) == {"a": "1", "b": "x", "c": None}
    assert check_values(declared, {"a": "1", "c": None}) == {"a": "1", "b": "x", "c": None}
    with pytest.raises(RenderError, match="'a' \\(string\\) is required"):
        check_values(declared, {})
    with pytest.raises(RenderError, match="no variable 'z'"):
        check_values(declared, {"a": "1", "z": 2})


def test_save_time_problems() -> None:
    [syntax] = body_problems("ok\n\n{% if %}", "text", [])
    assert (syntax.code, syntax.message[:7]) == ("syntax", "Line 3:")
    [undeclared] = body_problems("{{ a }}{{ b.c }}{% for x in d %}{{ x }}{% endfor %}", "html", [])
    assert "'a', 'b', 'd'" in undeclared.message
    assert body_problems("{% set y = 1 %}{{ y }}{{ range(2)|list }}", "text", []) == []
    codes = [p.code for p in body_problems("{% include 'x' %}{% extends 'y' %}", "text", [])]
    assert codes == ["include", "include"]
    problems = list(variable_problems([{"name": "x", "required": True, "default": "1"},
                                       {"name": "x"}, {"name": "run_id"}]))  # fmt: skip
    assert [p.code for p in problems] == [
        "required_with_default",
        "duplicate_variable",
        "reserved_name",
    ]


@pytest.mark.parametrize(
    "body",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ ''.__class__.__base__.__subclasses__() }}",
        "{{ v.__init__.__globals__ }}",
        "{{ v.append(1) }}",
        "{{ self.__init__.__globals__ }}",
        "{{ range.__self__ }}",
    ],
)
def test_the_sandbox_refuses_escapes(body: str) -> None:
    with pytest.raises(RenderError) as caught:
        render(body, "text", {"v": []})
    assert caught.value.code in ("unsafe", "undefined"), caught.value.message


@pytest.mark.parametrize(
    "body",
    [
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{{ 'ab' * 10**7 }}",
        "{{ ('ab' ~ 'cd')|replace('a', 'a' * 1000)|replace('a', 'a' * 1000) }}",
        "{% set s = 'x' * 900000 %}{% set s = s ~ s %}{{ s|length }}",
        "{{ range(99999)|join('x' * 100) }}",
        "{{ '%09999999d' % 1 }}",
    ],
)
def test_renders_stop_at_their_bounds(body: str) -> None:
    started = time.monotonic()
    with pytest.raises(RenderError) as caught:
        render(body, "text", {})
    assert caught.value.code in ("too_large", "too_long")
    assert time.monotonic() - started < 20


def test_the_tracer_is_put_back() -> None:
    before = sys.gettrace()
    render("{% for i in range(3) %}{{ i }}{% endfor %}", "text", {})
    with pytest.raises(RenderError):
        render("{{ 'x' * 10**8 }}", "text", {})
    assert sys.gettrace() is before


def test_output_up_to_the_limit_renders() -> None:
    text = render("{{ 'x' * n }}", "text", {"n": MAX_OUTPUT})
    assert len(text) == MAX_OUTPUT


def test_ids_and_file_names() -> None:
    assert is_template_id(" template.01m8vdz3de6vn03hcqxkvaeerj ")
    assert not is_template_id("template.x {{ y }}") and not is_template_id("Hello")
    assert file_name("Weekly report / Q4", "markdown") == "Weekly_report_Q4.md"
    assert file_name("..", "html") == "document.html"
