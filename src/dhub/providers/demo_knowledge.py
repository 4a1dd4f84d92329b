"""The demo model's turns for agents that list knowledge (docs/providers.md, "The demo model"):
an agent with table tools describes the table, then lets ``query_table`` compute what the
question asks for (the columns picked by the question's words); an agent with ontology tools
finds the object the question names by its key and follows its links. The answers are made of
what the tools returned, and say that the question was read by keyword matching, not
understood. What the demo model knows of the tables and ontologies is what any model is told:
the tools' descriptions (knowledge/tables_tools.py, knowledge/ontology_tools.py) and results.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dhub.providers.testing import Reply, ReplyLike
from dhub.providers.types import Message, ToolSpec

TABLE_TOOLS = frozenset({"describe_table", "query_table"})
ONTOLOGY_TOOLS = frozenset({"ontology_search", "ontology_follow"})
KEY = re.compile(r"\b[A-Z]{1,4}-\d{2,}\b")  # an order or customer id: A-1001, C-001
_TABLE_NAME = re.compile(r"^- '(.+?)' \(id [^)]*\)", re.MULTILINE)
_LINK = re.compile(
    r"^- link (\S+): (\S+) -> (\S+) \([a-z_]+(?:; backwards: (\S+))?\)", re.MULTILINE
)
_WORD = re.compile(r"[^\W_]+")
_NUMERIC = ("integer", "number")
_GROUPABLE = ("string", "boolean", "date")
_OPS = (  # the aggregate a question's words ask for; a sum otherwise
    ("avg", ("average", "mean", "avg")),
    ("max", ("maximum", "max", "largest", "biggest", "highest")),
    ("min", ("minimum", "min", "smallest", "lowest")),
    ("count", ("how many", "number of", "count")),
)
MAX_LISTED = 12  # result rows or objects an answer lists


def last_turn(messages: Sequence[Message]) -> tuple[str, tuple[Message, ...]]:
    """The user's last message and what came after it (the turn so far)."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    asked = messages[start].content if start >= 0 else ""
    return asked, tuple(messages[start + 1 :])


def tool_results(turn: Sequence[Message]) -> dict[str, list[tuple[str, bool]]]:
    """Each tool's results in the turn, in order: the text and whether the call failed."""
    names = {c.id: c.name for m in turn for c in m.tool_calls}
    found: dict[str, list[tuple[str, bool]]] = {}
    for m in turn:
        if m.role == "tool" and m.tool_call_id in names:
            found.setdefault(names[m.tool_call_id], []).append((m.content, m.is_error))
    return found


def json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _words(text: str) -> str:
    return " " + " ".join(w.lower() for w in _WORD.findall(text)) + " "


def _mentions(asked: str, name: str) -> bool:
    """Whether the question names a column or table (``unit_price``: "unit price")."""
    return _words(name) in _words(asked)


# -- tables ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableQuestion:
    """What a question asks of a table, read from its words."""

    group: str | None
    op: str
    column: str | None

    @property
    def result(self) -> str:
        return f"{self.op}_{self.column}" if self.column else "count"

    def arguments(self, table: str) -> dict[str, Any]:
        aggregate: dict[str, Any] = {"op": self.op, "as": self.result}
        if self.column:
            aggregate["column"] = self.column
        args: dict[str, Any] = {"table": table, "aggregates": [aggregate]}
        if self.group:
            args["group_by"] = [self.group]
            args["sort"] = [{"column": self.result, "desc": True}]
        return args

    def said(self) -> str:
        what = {"avg": "Average", "max": "Largest", "min": "Smallest", "sum": "Total"}
        head = "Rows" if self.column is None else f"{what[self.op]} {self.column}"
        return f"{head} by {self.group}" if self.group else head


def read_question(asked: str, columns: Sequence[dict[str, Any]]) -> TableQuestion:
    """The grouping column (one the question names after "by" or "per", else any named one that
    is not a number), the aggregate and its column (a named numeric column) of a question."""
    words = _words(asked)
    named = [c for c in columns if _mentions(asked, str(c.get("name", "")))]
    groupable = [c["name"] for c in named if c.get("type") in _GROUPABLE]
    after_by = [g for g in groupable if f" by {_words(g).strip()} " in words
                or f" per {_words(g).strip()} " in words]  # fmt: skip
    group = (after_by or groupable or [None])[0]
    measured = [c["name"] for c in named if c.get("type") in _NUMERIC and c["name"] != group]
    op = next((op for op, keys in _OPS if any(f" {k} " in words for k in keys)), "sum")
    if op == "count" or not measured:
        return TableQuestion(group, "count", None)
    return TableQuestion(group, op, measured[0])


def _table_name(asked: str, tool: ToolSpec) -> str:
    names = _TABLE_NAME.findall(tool.description)
    return next((n for n in names if _mentions(asked, n)), names[0] if names else "")


def table_turn(messages: Sequence[Message], tools: dict[str, ToolSpec], note: str) -> ReplyLike:
    """Describe the table the question names (or the agent's first), query it as the
    question's words say, and answer with the rows the query returned."""
    asked, turn = last_turn(messages)
    results = tool_results(turn)
    table = _table_name(asked, tools["describe_table"])
    step = len(turn)
    if "describe_table" not in results:
        return Reply(tool_calls=[{"id": f"demo_describe_{step}", "name": "describe_table",
                                  "arguments": {"table": table}}])  # fmt: skip
    described, failed = results["describe_table"][-1]
    info = json_object(described)
    if failed or info is None:
        return f"I could not read the table '{table}': {described}"
    question = read_question(asked, info.get("columns") or [])
    if "query_table" not in results:
        arguments = question.arguments(info.get("name", table))
        return Reply(tool_calls=[{"id": f"demo_query_{step}", "name": "query_table",
                                  "arguments": arguments}])  # fmt: skip
    answer, failed = results["query_table"][-1]
    found = json_object(answer)
    if failed or found is None:
        return f"The query of '{table}' failed: {answer}"
    return _table_answer(question, info, found.get("rows") or [], note)


def _table_answer(
    question: TableQuestion, info: dict[str, Any], rows: list[dict[str, Any]], note: str
) -> str:
    source = f"(computed by query_table from the {info.get('row_count', '?')} rows of table "
    source += f"'{info.get('name')}')"
    if question.group is None:
        value = rows[0].get(question.result) if rows else None
        body = f"{question.said()}: {_number(value)} {source}."
    else:
        shown = [f"{r.get(question.group)}: {_number(r.get(question.result))}" for r in rows]
        more = f", and {len(shown) - MAX_LISTED} more" if len(shown) > MAX_LISTED else ""
        body = f"{question.said()} {source}: " + "; ".join(shown[:MAX_LISTED]) + more + "."
    return f"{body}\n\n{note}"


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


# -- ontologies -----------------------------------------------------------------------------


def _links_from(kind: str, tool: ToolSpec) -> list[str]:
    """The link names (forwards, or backwards where the link has that name) that lead away
    from objects of type ``kind``, as the follow tool's description lists them."""
    names = []
    for name, source, target, inverse in _LINK.findall(tool.description):
        if source == kind:
            names.append(name)
        if target == kind and inverse:
            names.append(inverse)
    return names


def ontology_turn(messages: Sequence[Message], tools: dict[str, ToolSpec], note: str) -> ReplyLike:
    """Find the object whose key the question names, follow each of its links, and answer with
    the object and what it is linked to."""
    asked, turn = last_turn(messages)
    key = KEY.search(asked)
    if key is None:
        return f"Name an object by its key, for example 'Tell me about customer C-001'.\n\n{note}"
    results = tool_results(turn)
    step = len(turn)
    if "ontology_search" not in results:
        return Reply(tool_calls=[{"id": f"demo_search_{step}", "name": "ontology_search",
                                  "arguments": {"q": key.group(0)}}])  # fmt: skip
    searched, failed = results["ontology_search"][-1]
    page = json_object(searched) or {}
    objects = [o for o in page.get("objects") or [] if str(o.get("key")) == key.group(0)]
    if failed or not objects:
        return f"I found nothing with the key {key.group(0)}. {searched if failed else ''}".strip()
    found = objects[0]
    links = _links_from(str(found.get("type")), tools["ontology_follow"])
    if links and "ontology_follow" not in results:
        calls = [
            {"id": f"demo_follow_{step}_{i}", "name": "ontology_follow",
             "arguments": {"type": found["type"], "key": found["key"], "link": link}}
            for i, link in enumerate(links)
        ]  # fmt: skip
        return Reply(tool_calls=calls)
    followed = zip(links, results.get("ontology_follow", []), strict=False)
    return _ontology_answer(found, list(followed), note)


def _ontology_answer(
    found: dict[str, Any], followed: list[tuple[str, tuple[str, bool]]], note: str
) -> str:
    props = found.get("properties") or {}
    title = _title(found)
    shown = ", ".join(f"{k} {v}" for k, v in props.items())
    lines = [f"{str(found.get('type')).capitalize()} {found.get('key')}{title}: {shown}."]
    for link, (text, failed) in followed:
        page = json_object(text) or {}
        linked = [f"{o.get('key')}{_title(o)}" for o in page.get("objects") or []]
        listed = ", ".join(linked[:MAX_LISTED]) or "nothing"
        lines.append(f"- {link}: {text if failed else listed}")
    return "\n".join(lines) + f"\n\n{note}"


def _title(found: dict[str, Any]) -> str:
    """An object's title after its key, when it has one of its own."""
    title = found.get("title")
    return f" ({title})" if title and str(title) != str(found.get("key")) else ""
