"""Expressions and templates (DESIGN.md 3.1): Jinja2 in a sandbox, with strict undefined.

Three ways a string is read, depending on the field it sits in:

- **template** (prompts, ``template``): always renders to text;
- **value** (input mappings, end outputs, variable values, loop sources): a string that is
  exactly one ``{{ … }}`` block evaluates to a native value (a list stays a list); any other
  string renders as a template; non-strings are literal values;
- **condition** (if_else, edges): a bare expression, or one ``{{ … }}`` block, evaluated to a
  boolean.

An undefined name, a sandbox violation or any other failure is an ``ExpressionError`` naming the
node, the field and (for undefined names) the name. Pure: no I/O, no clock; compiled templates
are cached per source string, since a compiled graph evaluates the same strings again and again.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, TemplateError, UndefinedError
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

_ONE_BLOCK = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\}\}|\{\{).)*)\}\}\s*$", re.DOTALL)
_UNDEFINED_NAME = re.compile(r"'(?P<name>[^']+)' is undefined")
_NO_ATTRIBUTE = re.compile(r"has no attribute '(?P<name>[^']+)'")
_MAX_CACHED = 4096


def is_one_block(source: str) -> bool:
    """Whether ``source`` is exactly one ``{{ … }}`` block (a value field's native value)."""
    return _ONE_BLOCK.match(source) is not None


@dataclass(frozen=True, slots=True)
class Where:
    """Which node and field a string belongs to, for error messages."""

    node_id: str
    field: str


class ExpressionError(Exception):
    """A template or expression failed: ``code`` is undefined, unsafe, syntax or error."""

    def __init__(self, where: Where, message: str, code: str, name: str | None = None) -> None:
        super().__init__(f"node '{where.node_id}', field '{where.field}': {message}")
        self.where = where
        self.code = code
        self.name = name
        self.message = message


def _tojson(value: Any, indent: int | None = None) -> str:
    # Jinja's own tojson escapes <, >, & and ' for HTML; prompts want the JSON as it is.
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _fromjson(text: str) -> Any:
    return json.loads(text)


class Expressions:
    """The one expression language. Create one per process (or per compiled graph) and reuse
    it: compiling is the expensive part, and it is cached here."""

    def __init__(self) -> None:
        env = SandboxedEnvironment(
            undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
        )
        env.filters["tojson"] = _tojson
        env.filters["fromjson"] = _fromjson
        self._env = env
        self._templates: dict[str, Callable[[Mapping[str, Any]], str]] = {}
        self._expressions: dict[str, Callable[[Mapping[str, Any]], Any]] = {}

    def template(self, source: str, scope: Mapping[str, Any], where: Where) -> str:
        """Render ``source`` to text. Text with no markup is returned as it is (Jinja would
        also turn its \r into \n)."""
        if "{" not in source:
            return source
        render = self._templates.get(source)
        if render is None:
            render = self._cache(self._templates, source, self._compile_template(source, where))
        return self._run(render, scope, where)  # type: ignore[no-any-return]

    def value(self, source: Any, scope: Mapping[str, Any], where: Where) -> Any:
        """A value field: one ``{{ … }}`` block gives a native value, other strings render as
        templates, anything else is a literal."""
        if not isinstance(source, str):
            return source
        match = _ONE_BLOCK.match(source)
        if match is None:
            return self.template(source, scope, where)
        return self.expression(match.group("expr"), scope, where)

    def condition(self, source: str, scope: Mapping[str, Any], where: Where) -> bool:
        """A condition: a bare expression or one ``{{ … }}`` block, as a boolean."""
        match = _ONE_BLOCK.match(source)
        return bool(self.expression(match.group("expr") if match else source, scope, where))

    def expression(self, source: str, scope: Mapping[str, Any], where: Where) -> Any:
        """Evaluate a bare Jinja expression to a native value."""
        evaluate = self._expressions.get(source)
        if evaluate is None:
            evaluate = self._cache(self._expressions, source, self._compile_expr(source, where))
        return self._run(evaluate, scope, where)

    @staticmethod
    def _cache(store: dict[str, Any], source: str, compiled: Any) -> Any:
        if len(store) >= _MAX_CACHED:
            store.clear()
        store[source] = compiled
        return compiled

    def _compile_template(self, source: str, where: Where) -> Callable[[Mapping[str, Any]], str]:
        try:
            return self._env.from_string(source).render
        except TemplateError as exc:
            raise ExpressionError(where, f"invalid template: {exc}", "syntax") from exc

    def _compile_expr(self, source: str, where: Where) -> Callable[[Mapping[str, Any]], Any]:
        if not source.strip():
            raise ExpressionError(where, "the expression is empty", "syntax")
        try:
            compiled = self._env.compile_expression(source, undefined_to_none=False)
        except TemplateError as exc:
            raise ExpressionError(where, f"invalid expression {source!r}: {exc}", "syntax") from exc
        return lambda scope: compiled(**scope)

    @staticmethod
    def _run(
        function: Callable[[Mapping[str, Any]], Any], scope: Mapping[str, Any], where: Where
    ) -> Any:
        try:
            result = function(scope)
            _check_defined(result)
            return result
        except UndefinedError as exc:
            raise _undefined(where, exc) from exc
        except SecurityError as exc:
            raise ExpressionError(where, f"not allowed: {exc}", "unsafe") from exc
        except ExpressionError:
            raise
        except Exception as exc:  # user expressions can fail in any way; the run survives
            raise ExpressionError(where, f"{type(exc).__name__}: {exc}", "error") from exc


def _check_defined(value: Any) -> None:
    """Raise for an undefined value, also inside a list or object built by the expression
    (``{{ [missing] }}`` would otherwise carry the hole into the run's data)."""
    if isinstance(value, StrictUndefined):
        str(value)  # raises UndefinedError naming what is missing
    elif isinstance(value, list | tuple):
        for item in value:
            _check_defined(item)
    elif isinstance(value, dict):
        for item in value.values():
            _check_defined(item)


def _undefined(where: Where, exc: UndefinedError) -> ExpressionError:
    text = str(exc)
    found = _UNDEFINED_NAME.search(text) or _NO_ATTRIBUTE.search(text)
    name = found.group("name") if found else None
    message = f"'{name}' is undefined" if name else text
    return ExpressionError(where, message, "undefined", name)


@functools.cache
def shared() -> Expressions:
    """The process's expression language, made on first use: every run's stepper reuses what
    the others compiled (compiling a template costs more than a small run's own work)."""
    return Expressions()
