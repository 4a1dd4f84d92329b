"""The read-only SQL checker (knowledge/tables_sql.py), property-based: random safe queries
over the allowed tables are accepted, read only the allowed tables' storage and run on
SQLite; writes, other tables and escaping functions are refused wherever they appear."""

from __future__ import annotations

import re
import sqlite3

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from dhub.domain.resources import TableColumn
from dhub.knowledge.tables_sql import SqlRefused, SqlTable, check_sql, unknown_table

SALES = SqlTable(
    "table.01aaa",
    "sales",
    "kt_01aaa",
    [
        TableColumn(name="Region", type="string"),
        TableColumn(name="units", type="integer"),
        TableColumn(name="price", type="number"),
    ],
)
PEOPLE = SqlTable(
    "table.01bbb",
    "People list",
    "kt_01bbb",
    [TableColumn(name="name", type="string"), TableColumn(name="region", type="string")],
)
TABLES = [SALES, PEOPLE]
DIALECTS = ("sqlite", "postgres")
ESCAPES = (
    "load_extension('x')", "readfile('/etc/passwd')", "writefile('/tmp/x', 'y')",
    "pg_read_file('/etc/passwd')", "pg_ls_dir('.')", "dblink('host=x', 'select 1')",
    "pg_sleep(10)", "set_config('a', 'b', false)", "current_setting('data_directory')",
    "lo_import('/etc/passwd')", "query_to_xml('select 1', true, true, '')", "version()",
    "sqlite_version()", "pg_catalog.pg_read_file('x')", "randomblob(1000000000)",
    "zeroblob(1000000000)", "pg_terminate_backend(1)", "txid_current()", "nextval('s')",
)  # fmt: skip
OTHER_TABLES = (
    "sqlite_master", "sqlite_schema", "sqlite_temp_master", "information_schema.tables",
    "pg_catalog.pg_tables", "pg_user", "pg_shadow", "tokens", "users", "agents", "kt_01ccc",
    "main.sales", "public.tokens", "temp.x", '"table.01ccc"', "sales2",
)  # fmt: skip
WRITES = (
    "DELETE FROM sales", "UPDATE sales SET units = 1", "INSERT INTO sales VALUES (1, 2, 3)",
    "DROP TABLE sales", "CREATE TABLE x (a int)", "ALTER TABLE sales ADD COLUMN y int",
    "ATTACH DATABASE '/tmp/x' AS x", "PRAGMA writable_schema = 1", "VACUUM",
    "COPY sales TO '/tmp/x'", "SET statement_timeout = 0", "BEGIN", "COMMIT",
    "GRANT ALL ON sales TO x",
    "SELECT * INTO copy FROM sales", "SELECT * FROM sales FOR UPDATE",
    "WITH d AS (DELETE FROM sales RETURNING *) SELECT * FROM d",
    "SELECT 1; DELETE FROM sales", "REINDEX", "ANALYZE", "TRUNCATE sales",
)  # fmt: skip

columns = st.sampled_from(["Region", "region", "units", "price", "UNITS", "sales.price"])
numbers = st.integers(-1000, 1000).map(str)


@st.composite
def condition(draw: st.DrawFn) -> str:
    left = draw(st.sampled_from(["units", "price"]))
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
    cond = f"{left} {op} {draw(numbers)}"
    if draw(st.booleans()):
        cond += f" {draw(st.sampled_from(['AND', 'OR']))} Region LIKE 'n%'"
    return cond


@st.composite
def safe_query(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["plain", "group", "join", "cte", "union", "sub"]))
    where = f" WHERE {draw(condition())}" if draw(st.booleans()) else ""
    limit = f" LIMIT {draw(st.integers(1, 50))}" if draw(st.booleans()) else ""
    if kind == "plain":
        cols = ", ".join(draw(st.lists(columns, min_size=1, max_size=3)))
        return f"SELECT {cols} FROM sales{where}{limit}"
    if kind == "group":
        agg = draw(
            st.sampled_from(
                ["SUM(units)", "AVG(price)", "COUNT(*)", "MAX(price)", "ROUND(SUM(price), 2)"]
            )
        )
        return f"SELECT Region, {agg} AS v FROM Sales{where} GROUP BY Region ORDER BY v DESC{limit}"
    if kind == "join":
        return (
            'SELECT s.units, p.name FROM sales AS s JOIN "People list" AS p '
            f"ON p.region = s.region{limit}"
        )
    if kind == "cte":
        return f"WITH t AS (SELECT * FROM sales{where}) SELECT COUNT(*) FROM t{limit}"
    if kind == "union":
        return 'SELECT region FROM sales UNION SELECT region FROM "People list"'
    return f"SELECT * FROM (SELECT units * 2 AS u FROM sales{where}) AS q WHERE u > 0{limit}"


def storage() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE kt_01aaa (_row INTEGER PRIMARY KEY, region TEXT, units BIGINT, price DOUBLE)"
    )
    conn.execute('CREATE TABLE kt_01bbb (_row INTEGER PRIMARY KEY, "name" TEXT, "region" TEXT)')
    conn.execute(
        "INSERT INTO kt_01aaa (region, units, price) VALUES ('north', 3, 2.5), ('south', 1, 1.0)"
    )
    conn.execute("INSERT INTO kt_01bbb (name, region) VALUES ('ann', 'north')")
    return conn


def read_tables(sql: str, dialect: str) -> set[str]:
    tree = sqlglot.parse_one(sql, read=dialect)
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return {t.name for t in tree.find_all(exp.Table) if t.name not in ctes}


@settings(max_examples=300, deadline=None)
@given(query=safe_query(), dialect=st.sampled_from(DIALECTS))
def test_safe_queries_are_accepted_and_read_only_the_listed_tables(
    query: str, dialect: str
) -> None:
    checked = check_sql(query, TABLES, dialect, 100)  # type: ignore[arg-type]
    assert read_tables(checked.sql, dialect) <= {"kt_01aaa", "kt_01bbb"}
    if dialect == "sqlite":
        storage().execute(checked.sql).fetchall()  # it runs


@settings(max_examples=200, deadline=None)
@given(
    query=safe_query(),
    escape=st.sampled_from(ESCAPES),
    dialect=st.sampled_from(DIALECTS),
    where=st.integers(0, 2),
)
def test_escaping_functions_are_refused_anywhere(
    query: str, escape: str, dialect: str, where: int
) -> None:
    placed = [
        f"SELECT {escape}",
        f"SELECT units FROM sales WHERE units > (SELECT length({escape}))",
        f"WITH e AS (SELECT {escape} AS v) {query}",
    ][where]
    with pytest.raises(SqlRefused):
        check_sql(placed, TABLES, dialect, 100)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    other=st.sampled_from(OTHER_TABLES), dialect=st.sampled_from(DIALECTS), shape=st.integers(0, 3)
)
def test_other_tables_are_refused(other: str, dialect: str, shape: int) -> None:
    query = [
        f"SELECT * FROM {other}",
        f"SELECT * FROM sales JOIN {other} ON true",
        f"SELECT units FROM sales WHERE units IN (SELECT 1 FROM {other})",
        f"WITH {other.split('.')[-1].strip(chr(34))}x AS (SELECT 1) SELECT * FROM {other}",
    ][shape]
    with pytest.raises(SqlRefused):
        check_sql(query, TABLES, dialect, 100)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("write", WRITES)
def test_writes_are_refused(write: str, dialect: str) -> None:
    with pytest.raises(SqlRefused):
        check_sql(write, TABLES, dialect, 100)  # type: ignore[arg-type]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scoping_of_with_names(dialect: str) -> None:
    # a WITH name in a subquery does not hide a real table outside it
    with pytest.raises(SqlRefused, match="No table 'tokens'"):
        check_sql(
            "SELECT * FROM (WITH tokens AS (SELECT 1) SELECT * FROM tokens) q, tokens",
            TABLES,
            dialect,
            10,
        )  # type: ignore[arg-type]
    # a non-recursive WITH's own body names the real table
    checked = check_sql(
        "WITH sales AS (SELECT * FROM sales) SELECT * FROM sales", TABLES, dialect, 10
    )  # type: ignore[arg-type]
    assert read_tables(checked.sql, dialect) == {"kt_01aaa"}
    with pytest.raises(SqlRefused, match="No table 'kt_01ccc'"):
        check_sql("WITH kt_01ccc AS (SELECT * FROM kt_01ccc) SELECT 1", TABLES, dialect, 10)  # type: ignore[arg-type]


def test_names_messages_and_limits() -> None:
    assert check_sql("SELECT 1", TABLES, "sqlite", 10).sql == "SELECT 1 LIMIT 11"
    with pytest.raises(SqlRefused) as refused:
        check_sql("SELECT * FROM secret", TABLES, "sqlite", 10)
    assert str(refused.value) == unknown_table("secret", TABLES)
    twin = SqlTable("table.01ddd", "SALES", "kt_01ddd", SALES.columns)
    with pytest.raises(SqlRefused, match=re.escape('"table.01aaa", "table.01ddd"')):
        check_sql("SELECT * FROM sales", [*TABLES, twin], "sqlite", 10)
    checked = check_sql('SELECT units FROM "table.01ddd"', [*TABLES, twin], "sqlite", 10)
    assert read_tables(checked.sql, "sqlite") == {"kt_01ddd"}
    with pytest.raises(SqlRefused, match="exactly one"):
        check_sql("SELECT 1; SELECT 2", TABLES, "sqlite", 10)
    with pytest.raises(SqlRefused, match="does not parse"):
        check_sql("SELEC 1 FROM", TABLES, "sqlite", 10)
    with pytest.raises(SqlRefused, match="type"):
        check_sql("SELECT CAST(units AS regclass) FROM sales", TABLES, "postgres", 10)
