"""Read-only SQL over tables, checked with a real SQL parser (sqlglot) before it reaches the
database (docs/tables.md):

- exactly one statement, a SELECT (UNION/INTERSECT/EXCEPT and WITH are fine); nothing that
  writes, defines, locks, sets or calls the database's commands, no ``SELECT INTO``, no
  parameters;
- every table it reads is one of ``tables`` (the tables the caller may read and the agent
  listed), named by its resource name (whatever the case) or quoted id
  (``"table.01j..."``), or a WITH name in scope; no schema-qualified names, no table
  functions: system catalogs (sqlite_master, information_schema, pg_*) and the platform's
  own tables are simply not there to name;
- every function is on an allow-list (aggregates, windows, text, numbers, dates);
  load_extension, readfile, pg_read_file, dblink, pg_sleep, set_config, current_setting and
  the like are refused;
- then rewritten to the tables' storage names (each keeping its name as alias, so
  ``sales.price`` still works), column names to their stored lowercase form, and given a
  LIMIT when it has none.

A name that matches none of ``tables`` gets the same answer whether or not such a table
exists elsewhere. Two listed tables with one name (they sit in different folders): the name
is ambiguous, and the query must use their quoted ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dhub.knowledge.tables_schema import Dialect, SqlRefused, SqlTable, column_key

MAX_SQL_CHARS = 20_000

# sqlglot's own function classes, by their SQL name.
ALLOWED_FUNCTIONS = frozenset(
    [
        "COUNT",
        "SUM",
        "AVG",
        "MIN",
        "MAX",
        "GROUP_CONCAT",
        "STDDEV",
        "STDDEV_POP",
        "STDDEV_SAMP",
        "VARIANCE",
        "VARIANCE_POP",
        "COUNT_IF",
        "ARRAY_AGG",
        "ANY_VALUE",
        "ROW_NUMBER",
        "RANK",
        "DENSE_RANK",
        "NTILE",
        "PERCENT_RANK",
        "CUME_DIST",
        "LAG",
        "LEAD",
        "FIRST_VALUE",
        "LAST_VALUE",
        "NTH_VALUE",
        "COALESCE",
        "NULLIF",
        "IF",
        "CASE",
        "CAST",
        "TRY_CAST",
        "GREATEST",
        "LEAST",
        "LOWER",
        "UPPER",
        "LENGTH",
        "SUBSTRING",
        "TRIM",
        "REPLACE",
        "CONCAT",
        "CONCAT_WS",
        "LEFT",
        "RIGHT",
        "STR_POSITION",
        "INITCAP",
        "REVERSE",
        "REPEAT",
        "PAD",
        "SPLIT_PART",
        "ASCII",
        "CHR",
        "ABS",
        "ROUND",
        "FLOOR",
        "CEIL",
        "SQRT",
        "POW",
        "LN",
        "LOG",
        "EXP",
        "SIGN",
        "MOD",
        "RAND",
        "DATE",
        "DATE_TRUNC",
        "TIMESTAMP_TRUNC",
        "EXTRACT",
        "TIME_TO_STR",
        "STR_TO_TIME",
        "TS_OR_DS_TO_TIMESTAMP",
        "TS_OR_DS_TO_DATE",
        "TIME_STR_TO_TIME",
        "CURRENT_DATE",
        "CURRENT_TIMESTAMP",
        "DATE_ADD",
        "DATE_SUB",
        "DATE_DIFF",
        "DATEDIFF",
        "TIMESTAMP_ADD",
        "TIMESTAMP_SUB",
        "TIMESTAMP_DIFF",
        "TO_CHAR",
        "UNIX_TO_TIME",
        "TIME_TO_UNIX",
        "DAY",
        "MONTH",
        "YEAR",
        "DAY_OF_WEEK",
        "DAY_OF_YEAR",
        "WEEK",
        "QUARTER",
        "JSON_EXTRACT",
        "JSON_EXTRACT_SCALAR",
        "JSONB_EXTRACT",
        "JSONB_EXTRACT_SCALAR",
        "JSON_ARRAY_LENGTH",
        "JSONB_CONTAINS",
        "REGEXP_LIKE",
        "REGEXP_ILIKE",
    ]
)
# Functions sqlglot does not know (kept by name), lowercase.
ALLOWED_NAMES = frozenset(
    [
        "total",
        "julianday",
        "printf",
        "format",
        "strftime",
        "instr",
        "iif",
        "time",
        "datetime",
        "unixepoch",
        "ifnull",
        "date_part",
        "to_char",
        "to_date",
        "to_timestamp",
        "age",
        "string_agg",
        "bool_and",
        "bool_or",
        "every",
        "ltrim",
        "rtrim",
        "substr",
        "char",
        "hex",
        "typeof",
        "ceiling",
        "power",
        "log10",
        "trunc",
        "width_bucket",
    ]
)
# What SQLite itself is allowed to call (its authorizer, store/table_reads.py): the names
# above as SQLite spells them, and what the query's operators call (LIKE, GLOB, ->>).
SQLITE_FUNCTIONS = frozenset(
    [
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "total",
        "group_concat",
        "string_agg",
        "row_number",
        "rank",
        "dense_rank",
        "ntile",
        "percent_rank",
        "cume_dist",
        "lag",
        "lead",
        "first_value",
        "last_value",
        "nth_value",
        "coalesce",
        "ifnull",
        "nullif",
        "iif",
        "lower",
        "upper",
        "length",
        "substr",
        "substring",
        "trim",
        "ltrim",
        "rtrim",
        "replace",
        "concat",
        "concat_ws",
        "instr",
        "printf",
        "format",
        "char",
        "hex",
        "typeof",
        "abs",
        "round",
        "floor",
        "ceil",
        "ceiling",
        "sqrt",
        "pow",
        "power",
        "ln",
        "log",
        "log10",
        "exp",
        "sign",
        "mod",
        "random",
        "date",
        "time",
        "datetime",
        "julianday",
        "unixepoch",
        "strftime",
        "like",
        "glob",
        "json_extract",
        "->",
        "->>",
        "json_array_length",
    ]
)

_REFUSED_NODES: tuple[type[Any], ...] = (
    exp.DML, exp.DDL, exp.Command, exp.Pragma, exp.Into, exp.Lock, exp.Placeholder,
    exp.Parameter, exp.SessionParameter, exp.Set, exp.Transaction, exp.Commit, exp.Rollback,
    exp.Copy, exp.Use, exp.Describe, exp.Kill, exp.Grant, exp.LoadData, exp.Attach,
    exp.Detach,
)  # fmt: skip


_T = exp.DataType.Type
_CAST_TYPES = frozenset({
    _T.TEXT, _T.VARCHAR, _T.CHAR, _T.NCHAR, _T.NVARCHAR, _T.INT, _T.BIGINT, _T.SMALLINT,
    _T.TINYINT, _T.FLOAT, _T.DOUBLE, _T.DECIMAL, _T.BOOLEAN, _T.DATE, _T.DATETIME,
    _T.TIMESTAMP, _T.TIMESTAMPTZ, _T.TIME, _T.INTERVAL, _T.JSON, _T.JSONB,
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class CheckedSql:
    sql: str  # rewritten, in the database's dialect
    tables: list[SqlTable]  # the ones it reads
    ctes: list[str]  # its WITH names (SQLite's authorizer sees them read like tables)


def _listing(tables: Sequence[SqlTable]) -> str:
    if not tables:
        return "none"
    return ", ".join(f"'{t.name}'" for t in tables)


def unknown_table(name: str, tables: Sequence[SqlTable]) -> str:
    """The one message for a name that is none of the tables: the same whether a table of
    that name exists elsewhere (unshared, marked, not listed) or nowhere."""
    return (
        f"No table '{name}' among the tables this query may read ({_listing(tables)}): "
        "check the name."
    )


def _resolve(name: str, tables: Sequence[SqlTable]) -> SqlTable:
    by_id = [t for t in tables if t.id == name]
    if by_id:
        return by_id[0]
    found = [t for t in tables if t.name.lower() == name.lower()]
    if len(found) > 1:
        ids = ", ".join(f'"{t.id}"' for t in found)
        raise SqlRefused(
            f"Several tables are named '{name}': name the one you mean by its quoted id ({ids})."
        )
    if not found:
        raise SqlRefused(unknown_table(name, tables))
    return found[0]


def _function_name(node: exp.Func) -> tuple[str, bool]:
    """(name, known to sqlglot)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower(), False
    return node.sql_name().upper(), True


def _is_cte_reference(table: exp.Table) -> bool:
    """Whether ``table`` names a WITH query in scope (lexically: a WITH of an enclosing
    query; inside one of its CTEs, only the earlier ones, or all of them if RECURSIVE)."""
    name = table.name.lower()
    path: set[int] = {id(table)}
    parent = table.parent
    while parent is not None:
        with_ = parent.args.get("with_") or parent.args.get("with")
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            inside = next((i for i, c in enumerate(ctes) if id(c) in path), None)
            visible = ctes if inside is None or with_.args.get("recursive") else ctes[:inside]
            if any(c.alias_or_name.lower() == name for c in visible):
                return True
        path.add(id(parent))
        parent = parent.parent
    return False


def check_sql(sql: str, tables: Sequence[SqlTable], dialect: Dialect, max_rows: int) -> CheckedSql:
    """``sql`` checked and rewritten for ``dialect``, or SqlRefused saying why."""
    if not isinstance(sql, str) or not sql.strip():
        raise SqlRefused("Send one SELECT statement.")
    if len(sql) > MAX_SQL_CHARS:
        raise SqlRefused(f"The SQL is longer than {MAX_SQL_CHARS} characters.")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (ParseError, TokenError) as exc:
        raise SqlRefused(f"The SQL does not parse: {str(exc).splitlines()[0][:300]}") from None
    except RecursionError:
        raise SqlRefused("The SQL nests too deeply.") from None
    if len(statements) != 1:
        raise SqlRefused(f"Send exactly one statement (found {len(statements)}).")
    tree = statements[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise SqlRefused(
            "Only a SELECT can run here (UNION and WITH are fine): nothing that writes or "
            "changes the database."
        )
    used: dict[str, SqlTable] = {}
    known_columns = {column_key(c.name) for t in tables for c in t.columns}
    for node in list(tree.walk()):
        if isinstance(node, _REFUSED_NODES):
            raise SqlRefused(
                f"'{node.key.upper()}' cannot run here: only reading (SELECT) is allowed."
            )
        if isinstance(node, exp.Func) and not isinstance(node, exp.Connector | exp.Collate):
            name, known = _function_name(node)
            if (name not in ALLOWED_FUNCTIONS) if known else (name not in ALLOWED_NAMES):
                raise SqlRefused(
                    f"The function {name.lower()}() is not allowed here: use aggregates, "
                    "window functions, and text, number and date functions."
                )
        if isinstance(node, exp.DataType) and node.this not in _CAST_TYPES:
            raise SqlRefused(
                f"The type {node.sql(dialect=dialect)} is not allowed here: cast to text, "
                "integer, numbers, boolean, date, time or JSON types."
            )
        if isinstance(node, exp.Table):
            _check_table(node, tables, used)
        elif isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
            key = column_key(node.this.name)
            if key in known_columns:
                node.set("this", exp.to_identifier(key, quoted=True))
    if not tree.args.get("limit"):
        tree = tree.limit(max_rows + 1)
    ctes = sorted({c.alias_or_name for c in tree.find_all(exp.CTE)})
    return CheckedSql(tree.sql(dialect=dialect), list(used.values()), ctes)


def _check_table(node: exp.Table, tables: Sequence[SqlTable], used: dict[str, SqlTable]) -> None:
    if not isinstance(node.this, exp.Identifier):
        raise SqlRefused("FROM takes tables here, not functions.")
    if node.args.get("db") or node.args.get("catalog"):
        raise SqlRefused(
            f"Name tables without a schema ('{node.sql()}'): " + unknown_table(node.sql(), tables)
        )
    if _is_cte_reference(node):
        return
    name = node.name
    found = _resolve(name, tables)
    used[found.id] = found
    if not node.alias:  # the name as written (quoted or not) still names it in the query
        node.set("alias", exp.TableAlias(this=node.this.copy()))
    node.set("this", exp.to_identifier(found.physical, quoted=True))
