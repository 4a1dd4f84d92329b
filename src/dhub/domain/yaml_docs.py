"""YAML as another spelling of the API's JSON values (docs/api.md#yaml).

``load`` reads one YAML document into exactly the value the same data sent as JSON would give
(``yaml.safe_load``'s reading of scalars: ``yes`` is true, ``0x1F`` is 31), or raises
``InvalidInput`` with the line and column. JSON has no more than objects, arrays, text, numbers,
booleans and null, so anything else is refused rather than guessed at:

- **anchors and aliases** (``&a`` / ``*a``): an alias repeats a value without its size, which
  is how a few hundred bytes expand to gigabytes ("billion laughs"); refusing them bounds a
  document's size by its text (and the request body's limit);
- **tags** other than the JSON ones (``!!str``, ``!!int``, ``!!float``, ``!!bool``, ``!!null``,
  ``!!map``, ``!!seq``): no ``!!binary``, ``!!set``, ``!!timestamp``, ``!!python/...`` or local
  tags; dates stay text (``2024-05-01`` is a string), ``<<`` merge keys are plain keys;
- **keys that are not text** (``1: a``, ``yes: b``, ``null: c``), infinities and NaN.

The document is built from the parser's events without recursion, refusing nesting deeper than
JSON bodies may have (bounds.py) as soon as it is reached.

``dump`` writes a JSON value as YAML that ``load`` (and ``yaml.safe_load``, and YAML 1.2
readers) read back as the same value: key order kept, text that would read as a number,
boolean, null or date quoted, multi-line text as a literal block.
"""

from __future__ import annotations

import math
import re
from typing import Any, Protocol

import yaml
from yaml.constructor import SafeConstructor
from yaml.error import MarkedYAMLError, YAMLError
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
    SequenceEndEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from dhub.domain.bounds import MAX_DEPTH
from dhub.domain.errors import FieldError, InvalidInput
from dhub.domain.pointers import join

MEDIA_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_CORE}{t}" for t in ("str", "int", "float", "bool", "null")}
_MAP, _SEQ = f"{_CORE}map", f"{_CORE}seq"
_Parser: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)  # libyaml's when built with it


class _Resolver(Resolver):
    """safe_load's implicit scalars without timestamps, merge keys and ``=`` values."""


_Resolver.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in found if tag in _SCALAR_TAGS]
    for first, found in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_RESOLVER: Any = _Resolver()  # untyped in the stubs
_CONSTRUCTOR = SafeConstructor()


class _Mark(Protocol):  # libyaml's marks and PyYAML's
    line: int
    column: int


def _problem(where: str, mark: _Mark | None, message: str, code: str) -> InvalidInput:
    at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return InvalidInput([FieldError(where, f"{message}{at}.", code)])


class _Frame:
    __slots__ = ("key", "value")

    def __init__(self, value: dict[str, Any] | list[Any]) -> None:
        self.value = value
        self.key: str | None = None  # a mapping's key, read and waiting for its value


class _Builder:
    """The value of one document, from its events."""

    def __init__(self) -> None:
        self.stack: list[_Frame] = []
        self.root: Any = None

    def where(self, last: str | int | None = None) -> str:
        parts: list[str | int] = []
        for frame in self.stack:
            if isinstance(frame.value, list):
                parts.append(len(frame.value))
            elif frame.key is not None:
                parts.append(frame.key)
        if last is not None:
            parts.append(last)
        return join(*parts)

    def refuse(self, event: Event, message: str, code: str) -> InvalidInput:
        return _problem(self.where(), event.start_mark, message, code)

    def event(self, event: Event) -> None:
        if isinstance(event, AliasEvent):
            raise self.refuse(
                event,
                f"The alias '*{event.anchor}' repeats a value: aliases and anchors are not "
                "supported, write the value out",
                "yaml_alias",
            )
        if isinstance(event, NodeEvent) and event.anchor is not None:
            raise self.refuse(
                event,
                f"The anchor '&{event.anchor}' is not supported (nor are aliases): write each "
                "value out",
                "yaml_alias",
            )
        if isinstance(event, ScalarEvent):
            self.put(self.scalar(event), event)
        elif isinstance(event, CollectionStartEvent):
            self.open(event)
        elif isinstance(event, MappingEndEvent | SequenceEndEvent):
            frame = self.stack.pop()
            self.put(frame.value, event, placed=True)

    def open(self, event: CollectionStartEvent) -> None:
        mapping = isinstance(event, MappingStartEvent)
        self.check_tag(event, _MAP if mapping else _SEQ)
        if self.stack and isinstance(self.stack[-1].value, dict) and self.stack[-1].key is None:
            raise self.bad_key("a mapping" if mapping else "a list", event)
        if len(self.stack) >= MAX_DEPTH:
            raise self.refuse(
                event,
                f"The value is nested more than {MAX_DEPTH} levels deep: flatten it (or send it "
                "as a string)",
                "too_deep",
            )
        self.stack.append(_Frame({} if mapping else []))

    def put(self, value: Any, event: Event, placed: bool = False) -> None:
        """``value`` where it goes: the root, an item, a key, or a key's value. ``placed``:
        a collection, already checked as a key when it began."""
        if not self.stack:
            self.root = value
            return
        frame = self.stack[-1]
        if isinstance(frame.value, list):
            frame.value.append(value)
        elif frame.key is None and not placed:
            if not isinstance(value, str):
                raise self.bad_key(_describe(value), event)
            frame.key = value
        else:
            assert frame.key is not None
            frame.value[frame.key] = value
            frame.key = None

    def scalar(self, event: ScalarEvent) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            tag = _RESOLVER.resolve(ScalarNode, event.value, event.implicit)
        self.check_tag(event, tag)
        node = ScalarNode(tag, event.value, None, None, event.style)
        try:
            value = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, node)
        except (ValueError, KeyError, YAMLError):  # an explicit tag the text does not fit
            what = _KINDS.get(tag, tag)
            raise self.refuse(
                event, f"'{event.value}' is not {what}, as its tag '{_short(tag)}' says", "yaml_tag"
            ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise self.refuse(
                event,
                f"'{event.value}' is not a number JSON can hold (no infinities or NaN): quote it "
                "to send text",
                "yaml_number",
            )
        return value

    def check_tag(self, event: NodeEvent, resolved: str) -> None:
        tag = getattr(event, "tag", None)
        explicit = tag is not None and tag != "!"
        if (explicit and tag != resolved) or resolved not in {*_SCALAR_TAGS, _MAP, _SEQ}:
            wanted = "!!str, !!int, !!float, !!bool, !!null, !!map or !!seq"
            raise self.refuse(
                event,
                f"The tag '{_short(tag or resolved)}' is not one JSON data has: use {wanted}, or "
                "none",
                "yaml_tag",
            )
        if explicit and isinstance(event, ScalarEvent) and resolved not in _SCALAR_TAGS:
            raise self.refuse(
                event, f"The tag '{_short(tag)}' does not fit a plain value", "yaml_tag"
            )

    def bad_key(self, what: str, event: Event) -> InvalidInput:
        return self.refuse(
            event,
            f"A key is {what}, and keys must be text (JSON object keys are strings): quote it",
            "yaml_key",
        )


_KINDS = {f"{_CORE}int": "an integer", f"{_CORE}float": "a number", f"{_CORE}bool": "a boolean"}


def _short(tag: str | None) -> str:
    return "!!" + tag.removeprefix(_CORE) if tag and tag.startswith(_CORE) else str(tag)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    return f"the number {value}"


def load(source: str | bytes) -> Any:
    """The JSON value one YAML document spells (None for an empty one)."""
    builder, seen_document = _Builder(), False
    parser = _Parser(source)
    try:
        while True:
            event = parser.get_event()
            if event is None or isinstance(event, StreamEndEvent):
                break
            if isinstance(event, DocumentStartEvent):
                if seen_document:
                    raise _problem(
                        "",
                        event.start_mark,
                        "The body holds more than one YAML document ('---'): send one",
                        "yaml_invalid",
                    )
                seen_document = True
            builder.event(event)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or exc.context or "it cannot be read"
        raise _problem(
            builder.where(), mark, f"The body is not valid YAML: {reason}", "yaml_invalid"
        ) from None
    except YAMLError as exc:  # a reader error: bytes that are not text, or a forbidden char
        reason = " ".join(str(exc).split())
        raise _problem("", None, f"The body is not valid YAML: {reason}", "yaml_invalid") from None
    finally:
        parser.dispose()
    return builder.root


# -- writing -----------------------------------------------------------------------------------

_Emitter: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Emitter):  # type: ignore[misc]
    """SafeDumper, quoting also what YAML 1.2 readers take for numbers (``0o17``, ``1e3``,
    ``.Inf``), so the text stays text whichever reader reads it."""


_Dumper.add_implicit_resolver(
    f"{_CORE}int",
    re.compile(r"^[-+]?(?:0o[0-7]+|0x[0-9a-fA-F]+|[0-9][0-9_]*)$"),
    list("-+0123456789"),
)
_Dumper.add_implicit_resolver(
    f"{_CORE}float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
# Line breaks a block scalar would not keep as they are (the reader makes them "\n").
_NOT_IN_BLOCKS = re.compile("[\r\x85\u2028\u2029]")


def _text(dumper: Any, value: str) -> Any:
    block = "\n" in value and not _NOT_IN_BLOCKS.search(value)
    return dumper.represent_scalar(f"{_CORE}str", value, style="|" if block else None)


_Dumper.add_representer(str, _text)


def dump(value: Any) -> str:
    """``value`` (JSON data) as a YAML document."""
    text: str = yaml.dump(
        value,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    return text
