"""Reading CSV, JSON Lines and Parquet files into table rows: column names and types inferred
from a whole file (``infer``), then the file's rows as the stored values of a table's
columns, a batch at a time (``batches``). Every problem names the row (1 = the first data
row) and the column: "row 17, column 'price': 'abc' is not a number". Reads a local file;
nothing else."""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from dhub.domain.resources import MAX_COLUMNS, ColumnType, TableColumn
from dhub.knowledge.tables_schema import (
    STORAGE_CONVERTERS,
    BadValue,
    TextInference,
    column_key,
    from_json,
    header_names,
    json_kind,
    merge_kinds,
    storage,
)

Format = Literal["csv", "jsonl", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "jsonl", "parquet")
BATCH = 10_000
MAX_PROBLEMS = 20
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


class ImportProblems(Exception):
    """What is wrong with a file, each problem a sentence naming row and column."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems[:3]))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Source:
    path: Path
    format: Format


# -- the file's own columns ---------------------------------------------------------------------


def infer(source: Source) -> list[TableColumn]:
    """Columns for a new table: names from the header (or JSON keys, or Parquet fields),
    made identifiers (tables_schema.header_names), types inferred from every value;
    all nullable."""
    return infer_fast(source)[0]


def infer_fast(source: Source) -> tuple[list[TableColumn], bool]:
    """``infer``, and whether pyarrow's CSV reader read the whole file cleanly (then the
    import's second pass may use it too: ``batches(..., arrow=True)``)."""
    if source.format == "csv":
        try:
            return _infer_csv(source.path, arrow=True), True
        except ImportProblems:
            raise
        except Exception:  # pyarrow's parse errors: the csv module says where, and why
            return _infer_csv(source.path), False
    return infer_slow(source), False


def infer_slow(source: Source) -> list[TableColumn]:
    if source.format == "csv":
        return _infer_csv(source.path)
    if source.format == "jsonl":
        return _infer_jsonl(source.path)
    return _infer_parquet(source.path)


def _columns(names: Sequence[str], kinds: Sequence[ColumnType]) -> list[TableColumn]:
    if not names:
        raise ImportProblems(["the file has no columns"])
    if len(names) > MAX_COLUMNS:
        raise ImportProblems([f"the file has {len(names)} columns; a table holds {MAX_COLUMNS}"])
    return [TableColumn(name=n, type=k) for n, k in zip(names, kinds, strict=True)]


def _csv_rows(path: Path) -> Iterator[list[str]]:
    with path.open(newline="", encoding="utf-8-sig", errors="strict") as f:
        try:
            yield from csv.reader(f)
        except UnicodeDecodeError as exc:
            raise ImportProblems([f"the file is not UTF-8 text ({exc.reason})"]) from None
        except csv.Error as exc:
            raise ImportProblems([f"the CSV cannot be read: {exc}"]) from None


# (row numbers (1: the first data row), the cells column by column, problems (row, message))
Chunk = tuple[Sequence[int], list[Sequence[str]], list[tuple[int, str]]]


def _csv_chunks(path: Path, arrow: bool = False) -> tuple[list[str], Iterator[Chunk]]:
    """The header, and the data rows about ``BATCH`` at a time. ``arrow``: parsed by
    pyarrow's CSV reader (C++), for a file known to parse cleanly (``arrow_parses``);
    otherwise by the csv module, where a row of another width than the header's is a
    problem (left out) and blank lines are skipped."""
    rows = _csv_rows(path)
    header = next(rows, None)
    if header is None:
        raise ImportProblems(["the file is empty: a CSV starts with a header row"])
    width = len(header)
    if arrow:
        if any("\n" in name or "\r" in name for name in header):
            raise ValueError("a header spanning lines: pyarrow skips lines, not rows")
        return header, _arrow_chunks(path, width)

    def chunks() -> Iterator[Chunk]:
        numbers: list[int] = []
        chunk: list[list[str]] = []
        bad: list[tuple[int, str]] = []
        for number, row in enumerate(rows, start=1):
            if len(row) != width:
                if row:
                    message = f"row {number} has {len(row)} values; the header has {width} columns"
                    bad.append((number, message))
                continue
            numbers.append(number)
            chunk.append(row)
            if len(chunk) >= BATCH:
                yield numbers, _by_column(chunk, width), bad
                numbers, chunk, bad = [], [], []
        if chunk or bad:
            yield numbers, _by_column(chunk, width), bad

    return header, chunks()


def _by_column(chunk: list[list[str]], width: int) -> list[Sequence[str]]:
    return list(zip(*chunk, strict=True)) if chunk else [() for _ in range(width)]


def _arrow_chunks(path: Path, width: int) -> Iterator[Chunk]:
    """The data rows by pyarrow's CSV reader: every cell a string (empty ones too), quoted
    newlines kept, no blank lines (a blank line is a parse error here: ``arrow_parses``)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = [f"c{i}" for i in range(width)]
    reader = pacsv.open_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=1 << 20),
        parse_options=pacsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    start = 1
    for batch in reader:
        size = batch.num_rows
        columns = [batch.column(i).to_pylist() for i in range(width)]
        yield range(start, start + size), columns, []
        start += size


def _infer_csv(path: Path, arrow: bool = False) -> list[TableColumn]:
    header, chunks = _csv_chunks(path, arrow)
    inference = TextInference(len(header))
    for _, by_column, _ in chunks:
        for i, values in enumerate(by_column):
            inference.add_column(i, values)
    return _columns(header_names(header), inference.types())


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, object) of each non-blank line."""
    number = 0
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            number += 1
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise ImportProblems([f"row {number}: not JSON"]) from None
            if not isinstance(value, dict):
                raise ImportProblems([f"row {number}: a row is a JSON object"])
            yield number, value


def _infer_jsonl(path: Path) -> list[TableColumn]:
    kinds: dict[str, ColumnType | None] = {}
    for _, row in _json_lines(path):
        for key, value in row.items():
            kinds[key] = merge_kinds(kinds.get(key), json_kind(value))
    keys = list(kinds)
    return _columns(header_names(keys), [kinds[k] or "string" for k in keys])


def _parquet_kind(arrow_type: Any) -> ColumnType:
    import pyarrow as pa

    t = pa.types
    if t.is_boolean(arrow_type):
        return "boolean"
    if t.is_integer(arrow_type):
        return "integer"
    if t.is_floating(arrow_type) or t.is_decimal(arrow_type):
        return "number"
    if t.is_date(arrow_type):
        return "date"
    if t.is_timestamp(arrow_type):
        return "datetime"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return "string"
    if t.is_dictionary(arrow_type):
        return _parquet_kind(arrow_type.value_type)
    return "json"  # lists, structs, maps, anything else: as JSON


def _parquet_file(path: Path) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own errors for a damaged file
        raise ImportProblems([f"the file is not Parquet: {exc}"]) from None


def _infer_parquet(path: Path) -> list[TableColumn]:
    schema = _parquet_file(path).schema_arrow
    return _columns(header_names(schema.names), [_parquet_kind(f.type) for f in schema])


# -- rows for a table ---------------------------------------------------------------------------


def _mapping(
    names: Sequence[str], columns: Sequence[TableColumn], where: str = "", whole: bool = True
) -> list[int | None]:
    """For each column of the table, the index of the file's column holding it (None: the
    file has none). Names are matched as header_names makes them, whatever the case.
    ``whole``: the names are the whole file's (a required column must be among them)."""
    made = [column_key(n) for n in header_names(names)]
    by_key = {key: i for i, key in enumerate(made)}
    known_keys = {column_key(c.name) for c in columns}
    unknown = [names[i] for i, key in enumerate(made) if key not in known_keys]
    problems = []
    if unknown:
        known = ", ".join(c.name for c in columns)
        shown = ", ".join(f"'{n}'" for n in unknown[:10])
        problems.append(f"{where}the table has no column for {shown} (its columns: {known})")
    found = [by_key.get(column_key(c.name)) for c in columns]
    if whole:
        problems += [
            f"column '{c.name}' is required, and the file has no such column"
            for c, i in zip(columns, found, strict=True)
            if i is None and not c.nullable
        ]
    if problems:
        raise ImportProblems(problems)
    return found


class _Problems:
    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, message: str) -> None:
        self.found.append(message)
        if len(self.found) >= MAX_PROBLEMS:
            self.stop()

    def stop(self) -> None:
        if self.found:
            raise ImportProblems(self.found)


def batches(
    source: Source, columns: Sequence[TableColumn], arrow: bool = False
) -> Iterator[list[list[Any]]]:
    """The file's rows as the values of ``columns`` (in order), ``BATCH`` rows at a time.
    Raises ImportProblems (up to 20 problems) when the file does not fit the columns; rows
    before the first problem may have been yielded (the caller's transaction rolls back)."""
    if source.format == "csv":
        return _csv_batches(source.path, columns, arrow)
    if source.format == "jsonl":
        return _jsonl_batches(source.path, columns)
    return _parquet_batches(source.path, columns)


class _Required(BadValue):
    pass


def _cell(convert: Callable[[str], Any], nullable: bool) -> Callable[[str], Any]:
    """One column's converter of a text cell: '' is null (or a problem, when required)."""
    if nullable:
        return lambda text: convert(text) if text else None

    def required(text: str) -> Any:
        if not text:
            raise _Required("a value is required")
        return convert(text)

    return required


def _convert_column(cell: Callable[[str], Any], values: Sequence[str]) -> list[Any]:
    """A column's cells converted; each distinct value once when values repeat a lot."""
    distinct = set(values)
    if len(distinct) * 4 < len(values):
        converted = {text: cell(text) for text in distinct}
        return [converted[text] for text in values]
    return list(map(cell, values))


def _csv_batches(
    path: Path, columns: Sequence[TableColumn], arrow: bool = False
) -> Iterator[list[list[Any]]]:
    """Column by column within each batch: the cells of a column go through its converter
    together (no per-row Python loop); a problem sends the column through again, cell by
    cell, to name every row."""
    problems = _Problems()
    header, chunks = _csv_chunks(path, arrow)
    mapping = _mapping(header, columns)
    cells = [_cell(STORAGE_CONVERTERS[c.type], c.nullable) for c in columns]
    for numbers, by_column, bad in chunks:
        empty = ("",) * len(numbers)
        converted: list[list[Any]] = []
        found = [(number, -1, message) for number, message in bad]  # (row, column, message)
        for j, (cell, i, column) in enumerate(zip(cells, mapping, columns, strict=True)):
            values = by_column[i] if i is not None else empty
            try:
                converted.append(_convert_column(cell, values))
            except BadValue:
                for number, text in zip(numbers, values, strict=True):
                    try:
                        cell(text)
                    except BadValue as exc:
                        found.append((number, j, f"row {number}, column '{column.name}': {exc}"))
                        if len(found) >= MAX_PROBLEMS:
                            break
        for _, _, message in sorted(found)[:MAX_PROBLEMS]:
            problems.add(message)
        problems.stop()
        yield [list(row) for row in zip(*converted, strict=True)]
    problems.stop()


def _value_rows(
    rows: Iterator[tuple[int, list[Any]]], columns: Sequence[TableColumn]
) -> Iterator[list[list[Any]]]:
    """Rows of native values (JSON's, or Parquet's) in the columns' order, converted."""
    plan: list[tuple[ColumnType, bool, str]] = [(c.type, c.nullable, c.name) for c in columns]
    problems = _Problems()
    batch: list[list[Any]] = []
    for number, values in rows:
        out: list[Any] = []
        for value, (kind, nullable, name) in zip(values, plan, strict=True):
            if value is None:
                if not nullable:
                    problems.add(f"row {number}, column '{name}': a value is required")
                out.append(None)
                continue
            try:
                out.append(storage(kind, from_json(kind, value)))
            except BadValue as exc:
                problems.add(f"row {number}, column '{name}': {exc}")
                out.append(None)
        batch.append(out)
        if len(batch) >= BATCH:
            problems.stop()
            yield batch
            batch = []
    problems.stop()
    if batch:
        yield batch


def _jsonl_batches(path: Path, columns: Sequence[TableColumn]) -> Iterator[list[list[Any]]]:
    def rows() -> Iterator[tuple[int, list[Any]]]:
        mappings: dict[tuple[str, ...], list[int | None]] = {}  # by the row's keys, in order
        for number, row in _json_lines(path):
            keys = tuple(row)
            index = mappings.get(keys)
            if index is None:
                if len(mappings) > 1000:
                    mappings.clear()
                index = mappings[keys] = _mapping(keys, columns, f"row {number}: ", whole=False)
            values = list(row.values())
            yield number, [values[i] if i is not None else None for i in index]

    return _value_rows(rows(), columns)


def _parquet_batches(path: Path, columns: Sequence[TableColumn]) -> Iterator[list[list[Any]]]:
    file = _parquet_file(path)
    mapping = _mapping(file.schema_arrow.names, columns)

    def rows() -> Iterator[tuple[int, list[Any]]]:
        number = 0
        for record_batch in file.iter_batches(batch_size=BATCH):
            size = record_batch.num_rows
            values = [
                record_batch.column(i).to_pylist() if i is not None else [None] * size
                for i in mapping
            ]
            for row in zip(*values, strict=True):
                number += 1
                yield number, list(row)

    return _value_rows(rows(), columns)
