"""Bounds on every value the API accepts, so that nothing stored can fail to render later.

A request body is parsed by ``parse_document`` and every path, query and header value passes
``parameter_problems`` (api/deps.py does both, for every route); integer parameters use the
types below. What each bound protects:

- **Nesting depth** (``MAX_DEPTH``): the response encoder refuses values nested deeper than
  254 levels, and a response nests a stored value a few levels further (a page of agents whose
  owners carry a profile). 64 levels is far beyond any real document.
- **Integers** fit a signed 64-bit integer (what the database stores and the JSON codec writes
  as a number); versions, event sequence numbers and audit ids are 32-bit columns.
- **Numbers round-trip**: an integer literal too large for 64 bits would be read as a rounded
  float and stored as a different number, so it is refused instead.
- **NUL characters** (``\\u0000``): PostgreSQL text and JSON cannot hold them.
- **Sizes**: a body is at most ``MAX_BODY_BYTES``; a path, query or header parameter at most
  ``MAX_PARAM_CHARS`` characters (ids and search filters are short; SQLite refuses a LIKE
  pattern over 50,000 bytes).

Errors are ``FieldError``s with JSON pointers, reported all at once (up to ``MAX_ERRORS``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any

import orjson
from annotated_types import Interval, MaxLen
from pydantic import AfterValidator

from dhub.domain.errors import FieldError, InvalidInput
from dhub.domain.pointers import join

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
MAX_DEPTH = 64
MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_PARAM_CHARS = 500
MAX_ERRORS = 20
# A user's profile is shown with every resource the user owns (``owners``), on every page.
MAX_PROFILE_JSON_BYTES = 16 * 1024
MAX_URL_CHARS = 2048

# Integers kept in 32-bit columns (a body's integers are 64-bit, see parse_document). Plain
# constraints (not pydantic's Field), so they serve in models and FastAPI parameters alike.
VersionNumber = Annotated[int, Interval(ge=1, le=INT32_MAX)]  # versions: a 32-bit column
SeqNumber = Annotated[int, Interval(ge=0, le=INT32_MAX)]  # event sequence numbers, audit ids


def _small_json(value: dict[str, Any]) -> dict[str, Any]:
    size = len(orjson.dumps(value))
    if size > MAX_PROFILE_JSON_BYTES:
        raise ValueError(
            f"it is {size} bytes as JSON; the limit is {MAX_PROFILE_JSON_BYTES}: keep it small"
        )
    return value


ProfileJson = Annotated[dict[str, Any], AfterValidator(_small_json)]
Url = Annotated[str, MaxLen(MAX_URL_CHARS)]


class _Walk:
    """One pass over a parsed JSON value, collecting problems with their pointers."""

    __slots__ = ("errors", "inexact", "path")

    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.path: list[str | int] = []
        self.inexact = False  # a float that may have been an integer literal beyond 64 bits

    def add(self, message: str, code: str, last: str | int | None = None) -> None:
        if len(self.errors) < MAX_ERRORS:
            at = join(*self.path) if last is None else join(*self.path, last)
            self.errors.append(FieldError(at, message, code))

    def value(self, value: Any, depth: int) -> None:
        kind = type(value)
        if kind is str:
            if "\x00" in value:
                self.add(_NUL, "nul")
        elif kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                self.add(_BIG_INT, "integer_out_of_range")
        elif kind is float:  # orjson refuses NaN and infinities
            if abs(value) >= 2.0**63:
                self.inexact = True
        elif kind is dict or kind is list:
            self.container(value, depth + 1)

    def container(self, value: dict[str, Any] | list[Any], depth: int) -> None:
        if depth > MAX_DEPTH:
            self.add(_TOO_DEEP, "too_deep")
            return
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if len(self.errors) >= MAX_ERRORS:
                return
            if isinstance(key, str) and "\x00" in key:
                self.add(_NUL_KEY, "nul", key)
            self.path.append(key)
            self.value(item, depth)
            self.path.pop()


_NUL = "The text contains a NUL character (\\u0000), which cannot be stored: remove it."
_NUL_KEY = "The key contains a NUL character (\\u0000), which cannot be stored: remove it."
_BIG_INT = (
    f"The integer is outside the 64-bit range ({INT64_MIN} to {INT64_MAX}): send a smaller "
    "number, or a string if it is an identifier."
)
_TOO_DEEP = (
    f"The value is nested more than {MAX_DEPTH} levels deep: flatten it (or send it as a string)."
)


def _clean(items: Iterable[Any], depth: int) -> bool:
    """Whether values inside ``depth`` containers are within the bounds, quickly (``_Walk``
    says where they are not). A float of 2**63 or more is not clean: it may have been an
    integer literal beyond 64 bits (see ``parse_document``)."""
    for item in items:
        kind = type(item)
        if kind is str:
            if "\x00" in item:
                return False
        elif kind is int:
            if not INT64_MIN <= item <= INT64_MAX:
                return False
        elif kind is float:
            if not -(2.0**63) < item < 2.0**63:
                return False
        elif kind is dict:
            if depth >= MAX_DEPTH or any("\x00" in key for key in item):
                return False
            if not _clean(item.values(), depth + 1):
                return False
        elif kind is list and (depth >= MAX_DEPTH or not _clean(item, depth + 1)):
            return False
    return True


def parse_document(raw: bytes) -> Any:
    """A request body: JSON within the bounds, or ``InvalidInput`` pointing at each problem."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        reason = "it is nested too deeply" if "recursion" in str(exc) else str(exc)
        raise InvalidInput(
            [FieldError("", f"The request body is not valid JSON: {reason}.", "json_invalid")]
        ) from exc
    if _clean((value,), 0):  # the common case, without building pointers
        return value
    walk = _Walk()
    walk.value(value, 0)
    if walk.inexact and not any(e.code == "too_deep" for e in walk.errors):
        # orjson reads an integer literal beyond 64 bits as a float, losing digits: read the
        # (rare) body again exactly to find such literals (its depth is within bounds).
        walk = _Walk()
        walk.value(json.loads(raw), 0)
    if walk.errors:
        raise InvalidInput(walk.errors)
    return value


def check_document(value: Any) -> Any:
    """A request body read from another format (YAML): within the same bounds as JSON, or
    ``InvalidInput`` pointing at each problem."""
    if _clean((value,), 0):
        return value
    walk = _Walk()
    walk.value(value, 0)
    if walk.errors:
        raise InvalidInput(walk.errors)
    return value


def parameter_problems(location: str, name: str, value: str) -> list[FieldError]:
    """A path, query or header value (``location``: path, query or header)."""
    errors = []
    at = join(location, name)
    if "\x00" in value or "\x00" in name:
        errors.append(FieldError(at, f"'{name}' contains a NUL character: remove it.", "nul"))
    if len(value) > MAX_PARAM_CHARS and location != "header":
        errors.append(
            FieldError(
                at,
                f"'{name}' is {len(value)} characters long; the limit is {MAX_PARAM_CHARS}: "
                "send a shorter value.",
                "too_long",
            )
        )
    return errors
