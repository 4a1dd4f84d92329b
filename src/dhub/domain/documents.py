"""The document template language of Template resources (docs/templates.md): Jinja2 in an
immutable sandbox with strict undefined, checked when a template is saved and bounded when it
renders. Pure: no I/O, no clock; the engine's ``template`` node and the API both render
through ``render``.

Saving (``body_problems``): the body must parse (errors give the line), may use only the
variables it declares (and Jinja's own globals), and may not include, import or extend other
templates. Rendering (``check_values`` then ``render``): values are checked against the
declared types (errors name the variable), then the body renders under a budget: at most
``MAX_STEPS`` executed template lines, no string or list bigger than ``MAX_OUTPUT`` held or
made, and at most ``MAX_OUTPUT`` characters of output. A template that would loop for ever or
blow up its output fails with a ``RenderError`` saying which limit it hit.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup
from pydantic import MISSING, Field, model_validator

from dhub.domain.base import SpecModel

DocumentFormat = Literal["markdown", "html", "text"]
FORMATS: tuple[DocumentFormat, ...] = ("markdown", "html", "text")
TemplateType = Literal[
    "string", "number", "integer", "boolean", "date", "datetime", "object", "array"
]
MEDIA_TYPES: dict[str, str] = {
    "markdown": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "text": "text/plain; charset=utf-8",
}
EXTENSIONS: dict[str, str] = {"markdown": "md", "html": "html", "text": "txt"}

MAX_OUTPUT = 1_000_000  # characters of output, and of any one string or list made on the way
MAX_STEPS = 200_000  # template lines executed (each loop iteration runs a few)
MAX_POWER = 128  # the largest exponent of ``**``
# The render tool's own arguments (knowledge/templates.py): no variable may be named so.
RESERVED = frozenset({"template_id", "template_ids", "run_id", "variables"})
# A template node's ``template`` that is exactly this names a stored template.
TEMPLATE_ID = re.compile(r"template\.[0-9A-Za-z_-]{1,56}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WIDE_FORMAT = re.compile(r"%[-+ #0]*(?:\d{7,}|\*)|\.\d{7,}")
_WIDE_BRACES = re.compile(r"\{[^{}]*:[^{}]*\d{7,}[^{}]*\}")


class TemplateVariable(SpecModel):
    """A variable a template declares: the body may use it, a render must give it (unless it
    is optional) a value of its type."""

    name: str = Field(description="An identifier, used in the body as {{ name }}.")
    type: TemplateType = Field(default="string", description="What values it takes.")
    description: str = ""
    required: bool = Field(
        default=True,
        description="Whether a render must give it; defaults to true without a default, "
        "false with one.",
    )
    default: Any | MISSING = MISSING

    @model_validator(mode="after")
    def _optional_when_defaulted(self) -> TemplateVariable:
        if "required" not in self.model_fields_set and self.default is not MISSING:
            self.required = False
        return self


class RenderError(Exception):
    """A template cannot render with these values: ``message`` says why, naming the variable
    or the line where it can."""

    def __init__(self, message: str, code: str = "render", variable: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.variable = variable


@dataclass(frozen=True, slots=True)
class Problem:
    """A problem with a saved template: ``at`` is the path under the document."""

    at: tuple[str | int, ...]
    message: str
    code: str


def file_name(name: str, document_format: str) -> str:
    """A download name for a template's render: its name made safe, with the format's
    extension."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "document"
    return f"{stem[:100]}.{EXTENSIONS.get(document_format, 'txt')}"


def is_template_id(text: str) -> bool:
    """Whether a template node's ``template`` names a stored template (rather than being
    template text itself)."""
    return TEMPLATE_ID.fullmatch(text.strip()) is not None


# -- the environment ----------------------------------------------------------------------------


class _Budget(threading.local):
    steps: int = 0


_BUDGET = _Budget()


def _too_big(size: int) -> bool:
    return size > MAX_OUTPUT


def _refuse_size(what: str) -> RenderError:
    return RenderError(
        f"the template makes {what} longer than {MAX_OUTPUT:,} characters: render less "
        "(fewer or shorter items).",
        "too_large",
    )


def _sized(value: Any) -> int:
    return len(value) if isinstance(value, str | list | tuple | dict) else 0


class _Generator(CodeGenerator):
    """Jinja's code generator with every ``~`` (concatenation) checked for size."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:  # noqa: N802 (Jinja's)
        self.write("environment.sized(")
        super().visit_Concat(node, frame)
        self.write(")")


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with the operators that can multiply sizes checked first."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _Generator

    @staticmethod
    def sized(value: Any) -> Any:
        if _too_big(_sized(value)):
            raise _refuse_size("a joined string")
        return value

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                sized = isinstance(seq, str | list | tuple) and isinstance(times, int)
                if sized and _too_big(len(seq) * max(times, 0)):
                    raise _refuse_size("a repeated string or list")
        elif operator == "**":
            if isinstance(right, int | float) and abs(right) > MAX_POWER and abs(left) > 1:
                raise RenderError(f"'**' takes exponents up to {MAX_POWER}.", "too_large")
        elif operator == "+":
            if _too_big(_sized(left) + _sized(right)):
                raise _refuse_size("a joined string or list")
        elif operator == "%" and isinstance(left, str) and _WIDE_FORMAT.search(left):
            raise RenderError("'%' formatting with a huge width is not allowed.", "too_large")
        return super().call_binop(context, operator, left, right)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is not None and _WIDE_BRACES.search(value.__self__):

            def refused(*args: Any, **kwargs: Any) -> str:
                raise RenderError("a format with a huge width is not allowed.", "too_large")

            return refused
        return wrapped

    def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and _too_big(abs(value)):
                raise RenderError(
                    f"a call was given {value:,}: arguments go up to {MAX_OUTPUT:,}.", "too_large"
                )
        owner = getattr(__obj, "__self__", None)
        name = getattr(__obj, "__name__", "")
        if isinstance(owner, str) and name == "replace" and len(args) >= 2:
            _check_replace(owner, args[0], args[1])
        result = super().call(__context, __obj, *args, **kwargs)
        if _too_big(_sized(result)):
            raise _refuse_size("a value")
        return result


def _check_replace(text: Any, old: Any, new: Any) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        count = text.count(old) if old else len(text) + 1
        if _too_big(len(text) + count * (len(new) - len(old))):
            raise _refuse_size("a replaced string")


def _bounded_filter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A built-in filter whose result (and, for ``replace``, whose size before it is made) is
    checked against MAX_OUTPUT."""

    @functools.wraps(original)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and _too_big(abs(value)):
                raise RenderError(
                    f"the filter '{name}' was given {value:,}: arguments go up to {MAX_OUTPUT:,}.",
                    "too_large",
                )
        if name == "replace":
            rest = [a for a in args if not _is_context(a)]
            if len(rest) >= 3:
                _check_replace(str(rest[0]), rest[1], rest[2])
        if name == "join":
            _check_join(args, kwargs)
        if name == "format":
            rest = [a for a in args if not _is_context(a)]
            if rest and isinstance(rest[0], str) and _WIDE_FORMAT.search(rest[0]):
                raise RenderError("a format with a huge width is not allowed.", "too_large")
        result = original(*args, **kwargs)
        if _too_big(_sized(result)):
            raise _refuse_size(f"the result of '{name}'")
        return result

    return bounded


def _is_context(value: Any) -> bool:
    return type(value).__name__ in ("EvalContext", "Context", "Environment")


def _check_join(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    rest = [a for a in args if not _is_context(a)]
    items = rest[0] if rest else None
    separator = rest[1] if len(rest) > 1 else kwargs.get("d", "")
    if isinstance(items, list | tuple) and isinstance(separator, str):
        size = len(separator) * max(len(items) - 1, 0)
        size += sum(_sized(i) if isinstance(i, str) else 20 for i in items)
        if _too_big(size):
            raise _refuse_size("a joined string")


@functools.cache
def environment(document_format: str) -> _Sandbox:
    """The sandbox of a format: HTML autoescapes what it inserts (``|safe`` opts out), the
    others insert text as it is. No loader: nothing can be included, imported or extended."""
    env = _Sandbox(
        undefined=StrictUndefined,
        autoescape=document_format == "html",
        keep_trailing_newline=True,
    )
    for name in ("namespace", "lipsum", "cycler", "joiner"):
        env.globals.pop(name, None)  # a namespace would let values grow across iterations
    for name, original in list(env.filters.items()):
        env.filters[name] = _bounded_filter(name, original)
    return env


GLOBALS = frozenset(environment("text").globals)


# -- saving -------------------------------------------------------------------------------------


def body_problems(
    body: str, document_format: str, variables: Sequence[Mapping[str, Any]]
) -> list[Problem]:
    """What is wrong with a template's body: a syntax error (with its line), an include,
    import or extends, a variable used but not declared (all of them named at once)."""
    env = environment(document_format if document_format in FORMATS else "text")
    try:
        tree = env.parse(body)
    except TemplateSyntaxError as exc:
        return [Problem(("body",), f"Line {exc.lineno}: {exc.message}", "syntax")]
    problems = []
    for node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        word = type(node).__name__.lower().replace("fromimport", "import")
        problems.append(
            Problem(
                ("body",),
                f"Line {node.lineno}: a template cannot {word} other templates: put what you "
                "need in this one (macros may be defined here).",
                "include",
            )
        )
    declared = {v.get("name") for v in variables}
    used = meta.find_undeclared_variables(tree) - GLOBALS
    unknown = sorted(n for n in used if n not in declared)
    if unknown:
        names = ", ".join(f"'{n}'" for n in unknown)
        example = ", ".join(f'{{"name": "{n}", "type": "string"}}' for n in unknown[:2])
        problems.append(
            Problem(
                ("body",),
                f"The body uses {names}, not declared: add "
                f"{'them' if len(unknown) > 1 else 'it'} to variables (e.g. {example}) or "
                "remove them from the body.",
                "undeclared_variable",
            )
        )
    return problems


def variable_problems(variables: Sequence[Any]) -> Iterator[Problem]:
    """Names are identifiers, declared once; defaults fit their type; a required variable has
    no default."""
    seen: set[str] = set()
    for i, var in enumerate(variables):
        if not isinstance(var, Mapping):
            continue
        name = var.get("name")
        if isinstance(name, str):
            if _NAME.fullmatch(name) is None:
                yield Problem(
                    ("variables", i, "name"),
                    f"'{name}' is not a variable name: use letters, digits and '_', not "
                    "starting with a digit (e.g. 'customer_name').",
                    "invalid_name",
                )
            elif name in GLOBALS or name in RESERVED:
                yield Problem(
                    ("variables", i, "name"),
                    f"'{name}' is reserved (by the template language or the render tool): "
                    "choose another name.",
                    "reserved_name",
                )
            elif name in seen:
                yield Problem(
                    ("variables", i, "name"),
                    f"The variable '{name}' is declared twice: remove or rename one.",
                    "duplicate_variable",
                )
            seen.add(name)
        if var.get("required") is True and "default" in var:
            yield Problem(
                ("variables", i, "required"),
                f"'{name}' is required and has a default, which would never be used: remove "
                "'default', or set 'required' to false.",
                "required_with_default",
            )
        kind = var.get("type", "string")
        if "default" in var and var["default"] is not None and isinstance(kind, str):
            try:
                _typed(str(name), kind, var["default"])
            except RenderError as exc:
                yield Problem(("variables", i, "default"), exc.message, "wrong_type")


# -- values -------------------------------------------------------------------------------------


def check_values(variables: Sequence[TemplateVariable], values: Any) -> dict[str, Any]:
    """The values a render gets: each declared variable given, defaulted, or None when
    optional; each checked against its type (dates and datetimes become date objects).
    RenderError names the first variable that is missing, unknown or of the wrong type."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise RenderError("'variables' must be an object of name: value.", "type")
    declared = {v.name: v for v in variables}
    unknown = sorted(k for k in values if k not in declared)
    if unknown:
        names = ", ".join(sorted(declared)) or "none"
        raise RenderError(
            f"The template has no variable '{unknown[0]}' (it declares {names}): remove it or "
            "check its spelling.",
            "unknown_variable",
            unknown[0],
        )
    out: dict[str, Any] = {}
    for var in variables:
        if var.name in values and values[var.name] is not None:
            out[var.name] = _typed(var.name, var.type, values[var.name])
        elif var.name in values and not var.required:
            out[var.name] = None
        elif var.default is not MISSING:
            default = var.default
            out[var.name] = None if default is None else _typed(var.name, var.type, default)
        elif var.required:
            raise RenderError(
                f"The variable '{var.name}' ({var.type}) is required: give it a value.",
                "missing_variable",
                var.name,
            )
        else:
            out[var.name] = None
    return out


def _typed(name: str, kind: str, value: Any) -> Any:
    ok: Any = None
    if kind == "string":
        ok = value if isinstance(value, str) else None
    elif kind == "number":
        number = isinstance(value, int | float) and not isinstance(value, bool)
        ok = value if number and math.isfinite(value) else None
    elif kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            ok = value
        elif isinstance(value, float) and value.is_integer():
            ok = int(value)
    elif kind == "boolean":
        ok = value if isinstance(value, bool) else None
    elif kind == "date":
        ok = _date(value)
    elif kind == "datetime":
        ok = _datetime(value)
    elif kind == "object":
        ok = value if isinstance(value, dict) else None
    elif kind == "array":
        ok = value if isinstance(value, list) else None
    if ok is None:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        hint = {"date": " (YYYY-MM-DD)", "datetime": " (ISO 8601, e.g. 2026-01-31T09:30:00Z)"}
        raise RenderError(
            f"The variable '{name}' must be {_an(kind)}{hint.get(kind, '')}; got {shown}.",
            "wrong_type",
            name,
        )
    return ok


def _an(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _date(value: Any) -> dt.date | None:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return None
    return None


def _datetime(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, str) and re.match(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", value):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


# -- rendering ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _compiled(body: str, document_format: str) -> Any:
    return environment(document_format).from_string(body)


def render(body: str, document_format: str, values: Mapping[str, Any]) -> str:
    """Render a checked body with checked values (``check_values``), within the budget."""
    try:
        template = _compiled(body, document_format)
    except TemplateSyntaxError as exc:
        raise RenderError(f"Line {exc.lineno}: {exc.message}", "syntax") from exc
    except TemplateError as exc:
        raise RenderError(str(exc), "syntax") from exc
    previous = sys.gettrace()
    _BUDGET.steps = 0
    sys.settrace(_watch)
    try:
        out: list[str] = []
        size = 0
        for chunk in template.generate(values):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise _refuse_size("an output")
            out.append(chunk)
        return "".join(out)
    except RenderError:
        raise
    except UndefinedError as exc:
        raise RenderError(f"{exc.message}", "undefined") from exc
    except SecurityError as exc:
        raise RenderError(f"not allowed: {exc}", "unsafe") from exc
    except RecursionError as exc:
        raise RenderError("the template recurses too deeply.", "too_large") from exc
    except Exception as exc:  # a template can fail in any way; the caller gets a message
        raise RenderError(f"{type(exc).__name__}: {exc}", "error") from exc
    finally:
        sys.settrace(previous)


def _watch(frame: FrameType, event: str, arg: Any) -> Any:
    """The tracer of a render: it follows only the template's own code."""
    if frame.f_code.co_filename == "<template>":
        return _step
    return None


def _step(frame: FrameType, event: str, arg: Any) -> Any:
    steps = _BUDGET.steps = _BUDGET.steps + 1
    if steps > MAX_STEPS:
        raise RenderError(
            f"the template runs more than {MAX_STEPS:,} steps (a loop too long?): render less.",
            "too_long",
        )
    if not steps % 64:
        # A safety net: every operator, call and filter that can grow a value is checked
        # before or as it does (_Sandbox); reading the locals on every line would cost more
        # than the render itself.
        for value in frame.f_locals.values():
            if isinstance(value, str | list | tuple | Markup) and _too_big(len(value)):
                raise _refuse_size("a value")
    return _step
