"""The structured query of a table (POST /api/v1/tables/{id}/query, and the ``table.query``
operation): filter, select, group and aggregate, sort, page. A query is a JSON object,
checked against the table's columns (every problem with a JSON pointer), then compiled to a
SQLAlchemy Core SELECT: values are bound parameters, names are the table's own columns;
nothing is built from strings.

    {"filter": {"and": [{"column": "region", "op": "eq", "value": "north"},
                        {"column": "units", "op": "gt", "value": 10}]},
     "group_by": ["product"],
     "aggregates": [{"op": "sum", "column": "units", "as": "total"}],
     "sort": [{"column": "total", "desc": true}],
     "limit": 20}
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Select, Table, and_, func, literal, not_, or_, select

from dhub.domain.errors import FieldError, InvalidInput
from dhub.domain.pointers import join
from dhub.domain.resources import ColumnType, TableColumn
from dhub.knowledge.tables_schema import (
    COLUMN_NAME,
    ROW_ID,
    BadValue,
    column_key,
    from_json,
    shown,
    to_json,
)

OPS = ("eq", "ne", "lt", "le", "gt", "ge", "in", "contains", "is_null")
AGGREGATES = ("count", "sum", "avg", "min", "max")
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_IN = 1000
MAX_CONDITIONS = 100
_NUMERIC = ("integer", "number")
_ORDERED = ("string", "number", "integer", "date", "datetime")
_KEYS = {"select", "filter", "group_by", "aggregates", "sort", "limit", "cursor"}

Loc = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class OutColumn:
    name: str  # as the result shows it
    type: ColumnType


@dataclass(frozen=True, slots=True)
class CompiledQuery:
    statement: Select[Any]
    columns: list[OutColumn]
    limit: int
    offset: int


class _Checker:
    def __init__(self, columns: Sequence[TableColumn], table: Table) -> None:
        self.columns = {column_key(c.name): c for c in columns}
        self.table = table
        self.errors: list[FieldError] = []
        self.conditions = 0

    def error(self, at: Loc, message: str, code: str = "invalid_query") -> None:
        self.errors.append(FieldError(join(*at), message, code))

    def column(self, name: Any, at: Loc) -> TableColumn | None:
        if not isinstance(name, str):
            self.error(at, "A column is named by a string.")
            return None
        found = self.columns.get(column_key(name))
        if found is None:
            known = ", ".join(c.name for c in self.columns.values())
            self.error(at, f"The table has no column {shown(name)} (its columns: {known}).")
        return found

    def names(self, value: Any, at: Loc) -> list[TableColumn]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(at, 'Give a list of column names, e.g. ["region", "units"].')
            return []
        found = [self.column(v, (*at, i)) for i, v in enumerate(value)]
        return [c for c in found if c is not None]

    def value(self, column: TableColumn, value: Any, at: Loc) -> Any:
        try:
            return from_json(column.type, value)
        except BadValue as exc:
            self.error(at, f"column '{column.name}': {exc}.")
            return None

    def condition(self, cond: Any, at: Loc) -> ColumnElement[bool] | None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            if self.conditions == MAX_CONDITIONS + 1:
                self.error(at, f"A filter has at most {MAX_CONDITIONS} conditions.")
            return None
        if not isinstance(cond, dict):
            self.error(at, 'A condition is an object: {"column": ..., "op": ..., "value": ...}, '
                       'or {"and": [...]}, {"or": [...]}, {"not": {...}}.')  # fmt: skip
            return None
        for joiner, make in (("and", and_), ("or", or_)):
            if joiner in cond:
                parts = cond[joiner]
                if len(cond) != 1 or not isinstance(parts, list) or not parts:
                    self.error(
                        (*at, joiner), f'"{joiner}" takes a non-empty list of conditions, alone.'
                    )
                    return None
                built = [self.condition(p, (*at, joiner, i)) for i, p in enumerate(parts)]
                return make(*built) if all(b is not None for b in built) else None  # type: ignore[arg-type]
        if "not" in cond:
            if len(cond) != 1:
                self.error(at, '"not" takes one condition, alone.')
                return None
            inner = self.condition(cond["not"], (*at, "not"))
            return not_(inner) if inner is not None else None
        return self.comparison(cond, at)

    def comparison(self, cond: dict[str, Any], at: Loc) -> ColumnElement[bool] | None:
        extra = set(cond) - {"column", "op", "value"}
        if extra:
            self.error((*at, sorted(extra)[0]), f"Unknown key {shown(sorted(extra)[0])}: a "
                       "condition has column, op and value.")  # fmt: skip
        column = self.column(cond.get("column"), (*at, "column"))
        op = cond.get("op")
        if op not in OPS:
            self.error((*at, "op"), f"{shown(op)} is not an op: use one of {', '.join(OPS)}.")
            return None
        if column is None:
            return None
        target = self.table.c[column_key(column.name)]
        value = cond.get("value")
        vat = (*at, "value")
        if op == "is_null":
            if value not in (None, True, False):
                self.error(vat, '"is_null" takes true (the default) or false.')
                return None
            return target.is_(None) if value is not False else target.is_not(None)
        if value is None:
            self.error(vat, f'"{op}" needs a value (use "is_null" for missing values).')
            return None
        if op == "in":
            if not isinstance(value, list) or not 0 < len(value) <= MAX_IN:
                self.error(vat, f'"in" takes a list of 1 to {MAX_IN} values.')
                return None
            errors = len(self.errors)
            values = [self.value(column, v, (*vat, i)) for i, v in enumerate(value)]
            return target.in_(values) if len(self.errors) == errors else None
        if op == "contains":
            if column.type != "string" or not isinstance(value, str):
                self.error(vat, '"contains" matches text in a string column (whatever the case).')
                return None
            return func.lower(target).contains(value.lower(), autoescape=True)
        if column.type == "json":
            self.error((*at, "column"), f"'{column.name}' holds JSON: only is_null applies to it.")
            return None
        errors = len(self.errors)
        bound = self.value(column, value, vat)
        if len(self.errors) > errors:
            return None
        param = literal(bound, target.type)  # a bound parameter, whatever the value
        return {
            "eq": target.__eq__, "ne": target.__ne__, "lt": target.__lt__,
            "le": target.__le__, "gt": target.__gt__, "ge": target.__ge__,
        }[op](param)  # fmt: skip


def _int(value: Any, at: Loc, low: int, high: int, errors: list[FieldError]) -> int | None:
    if type(value) is not int or not low <= value <= high:
        errors.append(FieldError(join(*at), f"Give an integer from {low} to {high}.", "range"))
        return None
    return value


def encode_offset(offset: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"offset": offset})).decode().rstrip("=")


def decode_offset(cursor: Any, errors: list[FieldError]) -> int:
    try:
        offset = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = offset["offset"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        offset = None
    if type(offset) is not int or not 0 <= offset < 2**31:
        message = "The cursor is not one a query gave: pass next_cursor as it came."
        errors.append(FieldError("/cursor", message, "invalid_cursor"))
        return 0
    return offset


def compile_query(
    query: Any, columns: Sequence[TableColumn], table: Table, max_limit: int = MAX_LIMIT
) -> CompiledQuery:
    """The SELECT for ``query`` over ``table`` (whose columns are ``columns``), or
    InvalidInput listing every problem."""
    if not isinstance(query, dict):
        raise InvalidInput([FieldError("", "A query is a JSON object.", "type")])
    check = _Checker(columns, table)
    for key in sorted(set(query) - _KEYS):
        check.error((key,), f"Unknown key {shown(key)}: a query has {', '.join(sorted(_KEYS))}.")
    where = (
        check.condition(query["filter"], ("filter",)) if query.get("filter") is not None else None
    )
    group = check.names(query["group_by"], ("group_by",)) if "group_by" in query else []
    aggregates = _aggregates(check, query.get("aggregates"))
    out: list[tuple[OutColumn, ColumnElement[Any]]] = []
    if group or aggregates:
        if "select" in query:
            check.error(("select",), 'With group_by or aggregates, the result is the group_by '
                        'columns then the aggregates: leave "select" out.')  # fmt: skip
        out += [(OutColumn(c.name, c.type), table.c[column_key(c.name)]) for c in group]
        out += aggregates
    else:
        chosen = check.names(query["select"], ("select",)) if "select" in query else list(columns)
        out += [(OutColumn(c.name, c.type), table.c[column_key(c.name)]) for c in chosen]
    names = [o.name for o, _ in out]
    if len({n.lower() for n in names}) != len(names):
        check.error(("aggregates",), 'Two result columns have the same name: set "as" apart.')
    by_name = {o.name.lower(): expr for o, expr in out}
    order = _sort(check, query.get("sort"), by_name, bool(group or aggregates))
    limit = (
        DEFAULT_LIMIT
        if query.get("limit") is None
        else _int(query["limit"], ("limit",), 1, max_limit, check.errors)
    )
    offset = decode_offset(query["cursor"], check.errors) if query.get("cursor") else 0
    if check.errors:
        raise InvalidInput(check.errors[:20])
    labelled = [expr.label(f"c{i}") for i, (_, expr) in enumerate(out)]
    statement = select(*labelled).select_from(table)
    if where is not None:
        statement = statement.where(where)
    if group:
        statement = statement.group_by(*(table.c[column_key(c.name)] for c in group))
    statement = statement.order_by(*order)
    if group:
        statement = statement.order_by(*(table.c[column_key(c.name)] for c in group))
    elif not aggregates:
        statement = statement.order_by(table.c[ROW_ID])
    assert limit is not None
    statement = statement.limit(limit + 1).offset(offset)  # one more: is there a next page?
    return CompiledQuery(statement, [o for o, _ in out], limit, offset)


def _aggregates(check: _Checker, value: Any) -> list[tuple[OutColumn, ColumnElement[Any]]]:
    if value is None:
        return []
    if not isinstance(value, list):
        check.error(("aggregates",), 'Give a list: [{"op": "sum", "column": "units"}, ...].')
        return []
    out: list[tuple[OutColumn, ColumnElement[Any]]] = []
    for i, item in enumerate(value):
        at: Loc = ("aggregates", i)
        if not isinstance(item, dict) or set(item) - {"op", "column", "as"}:
            check.error(at, 'An aggregate is {"op": ..., "column": ..., "as": ...}.')
            continue
        op = item.get("op")
        if op not in AGGREGATES:
            check.error((*at, "op"), f"{shown(op)} is not an aggregate: use one of "
                        f"{', '.join(AGGREGATES)}.")  # fmt: skip
            continue
        alias = item.get("as")
        if alias is not None and (not isinstance(alias, str) or not COLUMN_NAME.fullmatch(alias)):
            check.error((*at, "as"), "Name the result with letters, digits and '_'.")
            continue
        if op == "count" and item.get("column") is None:
            out.append((OutColumn(alias or "count", "integer"), func.count()))
            continue
        column = check.column(item.get("column"), (*at, "column"))
        if column is None:
            continue
        target = check.table.c[column_key(column.name)]
        name = alias or f"{op}_{column.name}"
        if op == "count":
            out.append((OutColumn(name, "integer"), func.count(target)))
        elif op in ("sum", "avg") and column.type not in _NUMERIC:
            check.error((*at, "column"), f"'{column.name}' is {column.type}: {op} takes an "
                        "integer or number column.")  # fmt: skip
        elif op in ("min", "max") and column.type not in _ORDERED:
            check.error((*at, "column"), f"'{column.name}' is {column.type}: {op} does not "
                        "apply (count it, or group by it).")  # fmt: skip
        elif op == "sum":
            out.append((OutColumn(name, column.type), func.sum(target)))
        elif op == "avg":
            out.append((OutColumn(name, "number"), func.avg(target)))
        else:
            agg = func.min(target) if op == "min" else func.max(target)
            out.append((OutColumn(name, column.type), agg))
    return out


def _sort(
    check: _Checker, value: Any, by_name: dict[str, ColumnElement[Any]], grouped: bool
) -> list[ColumnElement[Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        check.error(("sort",), 'Give a list: [{"column": "units", "desc": true}, ...].')
        return []
    order: list[ColumnElement[Any]] = []
    for i, item in enumerate(value):
        at: Loc = ("sort", i)
        if isinstance(item, str):
            item = {"column": item.removeprefix("-"), "desc": item.startswith("-")}
        if (
            not isinstance(item, dict)
            or set(item) - {"column", "desc"}
            or not isinstance(item.get("desc", False), bool)
        ):
            check.error(at, 'A sort key is {"column": ..., "desc": false} or "column" / "-column".')
            continue
        name = item.get("column")
        expr = by_name.get(name.lower()) if isinstance(name, str) else None
        if expr is None and not grouped and isinstance(name, str):
            column = check.column(name, (*at, "column"))
            expr = check.table.c[column_key(column.name)] if column is not None else None
            if expr is None:
                continue
        if expr is None:
            check.error((*at, "column"), f"{shown(name)} is not a result column (group_by "
                        "columns and aggregate names).")  # fmt: skip
            continue
        order.append(expr.desc() if item.get("desc") else expr.asc())
    return order


def result_rows(
    columns: Sequence[OutColumn], rows: Sequence[Sequence[Any]]
) -> list[dict[str, Any]]:
    """Rows as objects by result name; numbers as their column type says (PostgreSQL's sums
    and averages come as decimals)."""
    convert = [
        (c.name, int if c.type == "integer" else float if c.type == "number" else None)
        for c in columns
    ]
    out = []
    for row in rows:
        item = {}
        for (name, make), value in zip(convert, row, strict=True):
            item[name] = make(value) if make is not None and value is not None else to_json(value)
        out.append(item)
    return out
