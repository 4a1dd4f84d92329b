"""Tables, the pure part: column names, values of each column type, type inference, schema
changes. No I/O.

Values have two forms: what JSON carries (the API, the model) and what a text file carries
(CSV). ``from_json`` and ``from_text`` turn either into the Python value stored (str, float,
int, bool, date, datetime, or any JSON value); ``to_json`` turns a stored value back.
Datetimes are stored without a time zone, in UTC: an offset given on the way in is applied.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Literal

import orjson

from dhub.domain.bounds import INT64_MAX, INT64_MIN
from dhub.domain.errors import FieldError
from dhub.domain.pointers import join
from dhub.domain.resources import (
    MAX_COLUMN_NAME,
    MAX_COLUMNS,
    ColumnType,
    TableColumn,
)

COLUMN_NAME = re.compile(rf"[A-Za-z][A-Za-z0-9_]{{0,{MAX_COLUMN_NAME - 1}}}")
ROW_ID = "_row"  # every table's own row id: no column name starts with '_'
_DATETIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?"
)
_TRUE = frozenset({"true", "t", "yes", "y"})
_FALSE = frozenset({"false", "f", "no", "n"})
MAX_STRING = 1_000_000  # characters in one value


def physical_name(resource_id: str) -> str:
    """The database table holding a table resource's rows: ``kt_`` and the id's unique part
    (``table.<ulid>``: lowercase letters and digits)."""
    _, _, unique = resource_id.partition(".")
    if not re.fullmatch(r"[0-9a-z]{1,56}", unique):
        raise ValueError(f"not a table id: {resource_id!r}")
    return f"kt_{unique}"


def column_key(name: str) -> str:
    """A column's name in the database, and the key that makes names unique: lowercase."""
    return name.lower()


# -- the schema ---------------------------------------------------------------------------------


def column_problems(body: dict[str, Any]) -> list[FieldError]:
    """Column names are identifiers, unique whatever the case, and not too many."""
    columns = body.get("columns")
    if not isinstance(columns, list):
        return []
    errors = []
    if len(columns) > MAX_COLUMNS:
        errors.append(
            FieldError(
                "/columns",
                f"A table has at most {MAX_COLUMNS} columns; this one has {len(columns)}.",
                "too_many",
            )
        )
    seen: dict[str, int] = {}
    for i, column in enumerate(columns):
        name = column.get("name") if isinstance(column, dict) else None
        if not isinstance(name, str):
            continue
        at = join("columns", i, "name")
        if not COLUMN_NAME.fullmatch(name):
            errors.append(FieldError(at, _bad_name(name), "invalid_name"))
        elif column_key(name) in seen:
            first = seen[column_key(name)]
            errors.append(
                FieldError(
                    at,
                    f"The column '{name}' is declared twice (also at /columns/{first}; names "
                    "are the same whatever their case): rename or remove one.",
                    "duplicate_column",
                )
            )
        else:
            seen[column_key(name)] = i
    return errors


def _bad_name(name: str) -> str:
    shown = name if len(name) <= 80 else name[:77] + "..."
    return (
        f"'{shown}' is not a column name: use letters, digits and '_', starting with a letter, "
        f"at most {MAX_COLUMN_NAME} characters (e.g. 'unit_price')."
    )


def header_names(raw: Sequence[str]) -> list[str]:
    """Column names made from a file's header: anything but letters, digits and '_' becomes
    '_', a name not starting with a letter gets 'c_' in front, an empty one is 'column_<n>',
    and a name already taken (whatever its case) gets '_2', '_3', ..."""
    names: list[str] = []
    taken: set[str] = set()
    for i, text in enumerate(raw, start=1):
        name = re.sub(r"[^A-Za-z0-9_]+", "_", text.strip()).strip("_")
        if not name:
            name = f"column_{i}"
        elif not name[0].isalpha():
            name = f"c_{name}"
        name = name[:MAX_COLUMN_NAME]
        base, n = name, 2
        while column_key(name) in taken:
            suffix = f"_{n}"
            name = base[: MAX_COLUMN_NAME - len(suffix)] + suffix
            n += 1
        taken.add(column_key(name))
        names.append(name)
    return names


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """What a new version of a table's columns asks of the stored rows."""

    added: list[TableColumn] = field(default_factory=list)
    dropped: list[TableColumn] = field(default_factory=list)
    retyped: list[tuple[TableColumn, TableColumn]] = field(default_factory=list)  # (old, new)
    required: list[TableColumn] = field(default_factory=list)  # newly not nullable


def schema_change(old: Sequence[TableColumn], new: Sequence[TableColumn]) -> SchemaChange:
    """Columns are matched by name (whatever the case): a column whose name changed is one
    dropped and one added."""
    before = {column_key(c.name): c for c in old}
    after = {column_key(c.name): c for c in new}
    change = SchemaChange()
    for key, column in after.items():
        was = before.get(key)
        if was is None:
            change.added.append(column)
            continue
        if was.type != column.type:
            change.retyped.append((was, column))
        if was.nullable and not column.nullable:
            change.required.append(column)
    change.dropped.extend(c for k, c in before.items() if k not in after)
    return change


# Type changes a table with rows can take: every stored value stays valid as it is.
WIDENING = frozenset({("integer", "number")})


# -- values -------------------------------------------------------------------------------------


class BadValue(ValueError):
    """A value that does not fit its column; the message says why (without the location)."""


def shown(value: Any) -> str:
    """A value in a message: a string quoted, anything else as JSON; cut short."""
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _a(kind: ColumnType) -> str:
    return {"integer": "an integer", "json": "a JSON value"}.get(kind, f"a {kind}")


def _parse_datetime(text: str) -> datetime:
    if not _DATETIME.fullmatch(text):
        raise BadValue(f"{shown(text)} is not a datetime (YYYY-MM-DDTHH:MM:SS, optional offset)")
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise BadValue(f"{shown(text)} is not a datetime") from None
    if found.tzinfo is not None:
        found = found.astimezone(UTC).replace(tzinfo=None)
    return found


def _integer(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise BadValue(f"{value} is out of range for an integer (64 bits)")
    return value


def _number(value: float) -> float:
    if not math.isfinite(value):
        raise BadValue(f"{value} is not a finite number")
    return value


def from_json(kind: ColumnType, value: Any) -> Any:
    """A JSON value as ``kind`` stores it (not None; the caller checks nullability)."""
    if kind == "json":
        return value
    if kind == "date" and type(value) is date:
        return value
    if kind == "datetime" and isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if kind == "number" and isinstance(value, Decimal):
        return _number(float(value))
    if kind == "string" and isinstance(value, str):
        if len(value) > MAX_STRING:
            raise BadValue(f"a string of {len(value)} characters is longer than {MAX_STRING}")
        return value
    if kind == "integer" and type(value) is int:
        return _integer(value)
    if kind == "integer" and type(value) is float and value.is_integer():
        return _integer(int(value))
    if kind == "number" and type(value) in (int, float):
        return _number(float(value))
    if kind == "boolean" and type(value) is bool:
        return value
    if kind == "date" and isinstance(value, str):
        return _text_date(value)
    if kind == "datetime" and isinstance(value, str):
        return _parse_datetime(value)
    raise BadValue(f"{shown(value)} is not {_a(kind)}")


def _plain(text: str) -> bool:
    """ASCII, no '_' and no surrounding space: what int() and float() would let through
    beyond a plain number."""
    return text.isascii() and "_" not in text and not text[0].isspace() and not text[-1].isspace()


def _text_integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadValue(f"{shown(text)} is not an integer") from None
    if not _plain(text):
        raise BadValue(f"{shown(text)} is not an integer")
    return _integer(value)


def _text_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadValue(f"{shown(text)} is not a number") from None
    if not _plain(text) or not math.isfinite(value):
        raise BadValue(f"{shown(text)} is not a number")
    return value


def _text_boolean(text: str) -> bool:
    low = text.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise BadValue(f"{shown(text)} is not a boolean (true or false)")


def _text_string(text: str) -> str:
    if len(text) > MAX_STRING:
        raise BadValue(f"a string of {len(text)} characters is longer than {MAX_STRING}")
    return text


def _text_json(text: str) -> Any:
    try:  # json cells hold JSON text
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise BadValue(f"{shown(text)} is not JSON") from None


def _text_date(text: str) -> date:
    if len(text) != 10 or text[4] != "-" or text[7] != "-":
        raise BadValue(f"{shown(text)} is not a date (YYYY-MM-DD)")
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise BadValue(f"{shown(text)} is not a date (YYYY-MM-DD)") from None


TEXT_CONVERTERS: dict[ColumnType, Callable[[str], Any]] = {
    "string": _text_string,
    "number": _text_number,
    "integer": _text_integer,
    "boolean": _text_boolean,
    "date": _text_date,
    "datetime": _parse_datetime,
    "json": _text_json,
}


# -- storage form: what the bulk path hands the driver (store/bulk.py) --------------------------


def stored_datetime(value: datetime) -> str:
    """A datetime as SQLAlchemy stores it in SQLite (and PostgreSQL reads as a timestamp)."""
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:"
        f"{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"
    )


def storage(kind: ColumnType, value: Any) -> Any:
    """A checked value (from_json, from_text) in the form the bulk path sends the database:
    dates as ISO text, datetimes as ``stored_datetime``, JSON as JSON text; the rest as is."""
    if value is None:
        return None
    if kind == "date":
        return value.isoformat()
    if kind == "datetime":
        return stored_datetime(value)
    if kind == "json":
        return orjson.dumps(value).decode()
    return value


def _stored_date(text: str) -> str:
    _text_date(text)
    return text  # checked: YYYY-MM-DD is already the stored form


STORAGE_CONVERTERS: dict[ColumnType, Callable[[str], Any]] = {
    **TEXT_CONVERTERS,
    "date": _stored_date,
    "datetime": lambda text: stored_datetime(_parse_datetime(text)),
    "json": lambda text: orjson.dumps(_text_json(text)).decode(),
}


def from_text(kind: ColumnType, text: str) -> Any:
    """A text cell (CSV) as ``kind`` stores it; the empty string is null (None)."""
    if text == "":
        return None
    return TEXT_CONVERTERS[kind](text)


def to_json(value: Any) -> Any:
    """A stored value as JSON carries it."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- inference ----------------------------------------------------------------------------------

# From the narrowest to the widest: a column's type is the narrowest every value fits.
_TEXT_ORDER: tuple[ColumnType, ...] = ("boolean", "integer", "number", "date", "datetime")


# What a value of one type is sure to be as well: no need to try those.
_IMPLIES: dict[ColumnType, frozenset[ColumnType]] = {
    "integer": frozenset({"number"}),
    "date": frozenset({"datetime"}),
}


class TextInference:
    """The type of each column of a text file, from every non-empty cell: boolean, integer,
    number, date or datetime if every value is one, else string."""

    def __init__(self, width: int) -> None:
        self.candidates: list[list[ColumnType]] = [list(_TEXT_ORDER) for _ in range(width)]
        self.seen = [False] * width

    def add(self, row: Sequence[str]) -> None:
        for i, text in enumerate(row[: len(self.candidates)]):
            self.add_column(i, (text,))

    def add_column(self, i: int, values: Iterable[str]) -> None:
        """Values of column ``i`` (each distinct one is checked once)."""
        left = self.candidates[i]
        distinct = set(values)
        distinct.discard("")
        if not distinct:
            return
        self.seen[i] = True
        for text in distinct:
            if not left:
                return  # a string already
            sure: frozenset[ColumnType] = frozenset()
            for kind in list(left):
                if kind in sure:
                    continue
                try:
                    TEXT_CONVERTERS[kind](text)
                except BadValue:
                    left.remove(kind)
                else:
                    sure = sure | _IMPLIES.get(kind, frozenset())

    def types(self) -> list[ColumnType]:
        out: list[ColumnType] = []
        for left, seen in zip(self.candidates, self.seen, strict=True):
            found = left[0] if seen and left else None
            out.append(found or "string")
        return out


def json_kind(value: Any) -> ColumnType | None:
    """The narrowest column type of one JSON value (None for null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        kinds: tuple[ColumnType, ...] = ("date", "datetime")
        for kind in kinds:
            try:
                from_text(kind, value)
                return kind
            except BadValue:
                pass
        return "string"
    return "json"


def merge_kinds(a: ColumnType | None, b: ColumnType | None) -> ColumnType | None:
    """The narrowest type holding values of both ``a`` and ``b``."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    pair = {a, b}
    if pair == {"integer", "number"}:
        return "number"
    if pair == {"date", "datetime"}:
        return "datetime"
    if "json" in pair:
        return "json"
    if pair <= {"string", "date", "datetime"}:
        return "string"
    return "json"  # e.g. numbers and strings: kept as they came


# What SQL over tables (knowledge/tables_sql.py) is given and refused with; here, not there,
# so that what only holds tables does not import the SQL parser (sqlglot loads slowly).
Dialect = Literal["sqlite", "postgres"]


class SqlRefused(ValueError):
    """Why the SQL cannot run, in a sentence for the person or model who wrote it."""


@dataclass(frozen=True, slots=True)
class SqlTable:
    """A table the SQL may read: what it is called, and where its rows are."""

    id: str
    name: str
    physical: str
    columns: Sequence[TableColumn]
