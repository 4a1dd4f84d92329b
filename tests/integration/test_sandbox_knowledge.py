"""Knowledge from code (issue 19): sandboxed Python calls its agent's knowledge tools with
``dhub_knowledge.call``, through the supervisor, for its own run only (docs/sandbox.md
"Knowledge from code"). The real sandbox throughout; the host (what performs a call) records
what reaches it, so each attack can show that nothing did."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dhub.domain.functions import AgentToolConfig
from dhub.domain.knowledge import KnowledgeTool
from dhub.domain.resources import ResolvedAgent
from dhub.engine import journal
from dhub.engine.compile import compile_agent
from dhub.engine.state import CallFunction
from dhub.providers.testing import Reply
from dhub.runtime.executor import RunResult, run_workflow
from dhub.runtime.ports import NoKnowledge, RealClock, SandboxFunctions
from dhub.sandbox.errors import HostRefused
from dhub.sandbox.runner import FunctionCall, SandboxRunner
from dhub.sandbox.worker import FunctionResult, Limits
from tests.conftest import sandbox_settings
from tests.integration.test_executor import Person
from tests.integration.test_knowledge_calls import Shelf
from tests.integration.test_react import Model, agent, call, events


class Host:
    """Performs knowledge calls from ``answers`` by tool name (an exception is raised), after
    ``delay`` seconds, recording each."""

    def __init__(self, answers: dict[str, Any] | None = None, delay: float = 0) -> None:
        self.answers = answers or {}
        self.delay = delay
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        if self.delay:
            await asyncio.sleep(self.delay)
        answer = self.answers.get(name, HostRefused(f"No knowledge tool '{name}'."))
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
async def runner() -> AsyncIterator[SandboxRunner]:
    limits = Limits(output_bytes=100_000, host_calls=5)
    runner = SandboxRunner(sandbox_settings(limits=limits))
    yield runner
    await runner.close()


async def run(
    runner: SandboxRunner, source: str, host: Host | None, seconds: float = 10,
    owner: str = "t", **inputs: Any,
) -> FunctionResult:  # fmt: skip
    return await runner.call(FunctionCall(source, inputs, seconds, owner=owner, host=host))


SUM = """
from dhub_knowledge import call

def main(month: int) -> dict:
    rows = call("query_table", {"filter": {"month": month}})
    return {"total": sum(r["units"] for r in rows["rows"])}
"""
ROWS = {"rows": [{"units": 3}, {"units": 4}]}
CATCH = """
from dhub_knowledge import KnowledgeError, call

def main(name: str, arguments: dict) -> dict:
    try:
        return {"value": call(name, arguments)}
    except KnowledgeError as exc:
        return {"refused": str(exc)}
"""


async def test_a_function_sums_the_rows_it_asked_for(runner: SandboxRunner) -> None:
    host = Host({"query_table": ROWS})
    result = await run(runner, SUM, host, month=5)
    assert result.ok, result
    assert result.value == {"total": 7}
    assert host.calls == [("query_table", {"filter": {"month": 5}})]


async def test_a_refusal_is_a_knowledge_error_caught_or_failing_the_call(
    runner: SandboxRunner,
) -> None:
    host = Host({"query_table": HostRefused("No table 'table.x' that you can read.")})
    caught = await run(runner, CATCH, host, name="query_table", arguments={})
    assert caught.value == {"refused": "No table 'table.x' that you can read."}
    failed = await run(runner, SUM, host, month=5)
    assert failed.kind == "exception"
    assert (failed.error_type, failed.message) == (
        "KnowledgeError", "No table 'table.x' that you can read.")  # fmt: skip
    assert 'File "<function>", line 5, in main' in failed.traceback


async def test_a_call_without_a_host_is_refused(runner: SandboxRunner) -> None:
    result = await run(runner, CATCH, None, name="query_table", arguments={})
    assert result.value == {"refused": "this call of the function cannot call knowledge"}


async def test_a_call_while_the_source_loads_is_refused(runner: SandboxRunner) -> None:
    host = Host({"query_table": ROWS})
    source = "from dhub_knowledge import call\nROWS = call('query_table', {})\n\ndef main():\n" \
             "    return ROWS\n"  # fmt: skip
    result = await run(runner, source, host)
    assert result.kind == "exception" and result.error_type == "KnowledgeError"
    assert "not while its source loads" in result.message
    assert host.calls == []


# -- bounds -------------------------------------------------------------------------------------


async def test_an_oversized_request_is_refused_before_it_leaves(runner: SandboxRunner) -> None:
    host = Host({"query_table": ROWS})
    result = await run(runner, CATCH, host, name="query_table", arguments={"x": "y" * 70_000})
    assert "over the limit of 65536" in result.value["refused"]
    assert host.calls == []


async def test_one_written_past_the_helper_is_refused_by_the_supervisor(
    runner: SandboxRunner,
) -> None:
    forged = """
import json, os
import dhub_knowledge

def main() -> dict:
    result_w, answer_r = dhub_knowledge._channel
    line = json.dumps({"kind": "host", "name": "query_table", "arguments": {"x": "y" * 70000}})
    os.write(result_w, line.encode() + b"\\n")
    return json.loads(os.read(answer_r, 100000))
"""
    host = Host({"query_table": ROWS})
    result = await run(runner, forged, host)
    assert result.ok, result
    assert result.value["ok"] is False
    assert "the knowledge request is 70" in result.value["message"]
    assert "over the limit of 65536" in result.value["message"]
    assert host.calls == []


async def test_a_big_answer_is_an_error_not_a_cut_one(runner: SandboxRunner) -> None:
    host = Host({"query_table": {"rows": ["x" * 1000] * 200}})
    result = await run(runner, CATCH, host, name="query_table", arguments={})
    refused = result.value["refused"]
    assert refused.startswith("the answer of 'query_table' is 2")
    assert "over the limit of 100000: ask for less at once" in refused


async def test_at_most_so_many_calls_in_one_call(runner: SandboxRunner) -> None:
    many = """
from dhub_knowledge import KnowledgeError, call

def main() -> dict:
    answers = []
    for i in range(8):
        try:
            answers.append(call("query_table", {"page": i})["rows"][0]["units"])
        except KnowledgeError as exc:
            answers.append(str(exc))
    return {"answers": answers}
"""
    host = Host({"query_table": ROWS})
    result = await run(runner, many, host)
    answers = result.value["answers"]
    assert answers[:5] == [3] * 5
    assert all(a.startswith("more than 5 knowledge calls in one call") for a in answers[5:])
    assert len(host.calls) == 5
    again = await run(runner, many, host)  # the count is per call, on the same warm worker
    assert again.value["answers"][:5] == [3] * 5 and len(host.calls) == 10


async def test_calls_count_against_the_calls_own_timeout(runner: SandboxRunner) -> None:
    host = Host({"query_table": ROWS}, delay=5)
    started = asyncio.get_running_loop().time()
    result = await run(runner, SUM, host, seconds=1, month=5)
    assert result.kind == "timeout"
    assert asyncio.get_running_loop().time() - started < 4


# -- attacks ------------------------------------------------------------------------------------


async def test_host_lines_printed_or_written_elsewhere_reach_nothing(
    runner: SandboxRunner,
) -> None:
    forger = """
import json, os, sys
import dhub_knowledge

def main() -> dict:
    mine = set(dhub_knowledge._channel)
    request = {"seq": 1, "kind": "host", "id": 1, "name": "query_table", "arguments": {}}
    answer = {"seq": 1, "kind": "host", "id": 1, "ok": True, "value": "forged"}
    lines = [json.dumps(request), json.dumps(answer), json.dumps({"kind": "host",
             "name": "query_table", "arguments": {}})]
    for line in lines:
        print(line)
        print(line, file=sys.stderr)
    written = []
    for fd in range(1024):
        if fd in mine:
            continue
        for line in lines:
            try:
                os.write(fd, line.encode() + b"\\n")
                written.append(fd)
            except OSError:
                pass
    try:
        os.write(dhub_knowledge._channel[1], b'{"ok": true, "value": "forged"}\\n')
        into_answers = True
    except OSError:
        into_answers = False
    return {"written": sorted(set(written)), "into_answers": into_answers}
"""
    host = Host({"query_table": ROWS})
    result = await run(runner, forger, host)
    assert result.ok, result
    assert result.value == {"written": [1, 2], "into_answers": False}  # stdout and stderr
    assert host.calls == []
    assert '"kind": "host"' in result.stderr  # what it printed is kept as text, nothing else
    after = await run(runner, SUM, host, month=1)  # and the next call gets its own answer
    assert after.value == {"total": 7} and len(host.calls) == 1


async def test_requests_sent_before_reading_an_answer_fail_the_call(
    runner: SandboxRunner,
) -> None:
    flood = """
import json, os
import dhub_knowledge

CALLS = []

def main(flood: bool) -> dict:
    CALLS.append(1)
    if not flood:
        return {"calls": len(CALLS)}
    result_w, _ = dhub_knowledge._channel
    line = json.dumps({"kind": "host", "name": "query_table", "arguments": {}}) + "\\n"
    os.write(result_w, (line * 50).encode())
    return {"sent": 50}
"""
    host = Host({"query_table": ROWS}, delay=0.2)
    assert (await run(runner, flood, host, flood=False)).value == {"calls": 1}
    result = await run(runner, flood, host, flood=True)
    assert result.kind == "invalid_output"
    assert "before reading the answer to its last one" in result.message
    assert host.calls == [("query_table", {})]  # the first one only
    # That worker was ended, not given back: the next call is a fresh interpreter's first.
    assert (await run(runner, flood, host, flood=False)).value == {"calls": 1}


async def test_answers_never_cross_between_calls_or_users(runner: SandboxRunner) -> None:
    asking = """
from dhub_knowledge import call

def main(times: int) -> dict:
    return {"answers": sorted({call("whoami", {"n": n}) for n in range(times)})}
"""
    hosts = {who: Host({"whoami": who}, delay=0.01) for who in ("ana", "ben", "cleo")}
    calls = [run(runner, asking, hosts[who], owner=owner, times=4)
             for who, owner in (("ana", "u1"), ("ben", "u1"), ("cleo", "u2"))]  # fmt: skip
    results = await asyncio.gather(*calls)
    assert [r.value for r in results] == [{"answers": [w]} for w in ("ana", "ben", "cleo")]
    assert all(len(h.calls) == 4 for h in hosts.values())
    # One after another on the same warm worker: each call its own host.
    for who in ("ben", "ana"):
        assert (await run(runner, asking, hosts[who], owner="u1", times=2)).value == {
            "answers": [who]}  # fmt: skip


async def test_a_call_in_flight_when_the_function_returns_is_dropped(
    runner: SandboxRunner,
) -> None:
    """A thread started while loading (it outlives calls) asks, and the call returns
    before the answer: the answer never reaches the next call, which gets its own."""
    late = """
import threading
from dhub_knowledge import KnowledgeError, call

go = threading.Event()
seen = []

def ask():
    while True:
        go.wait()
        go.clear()
        try:
            seen.append(call("slow", {}))
        except KnowledgeError as exc:
            seen.append(str(exc))

threading.Thread(target=ask, daemon=True).start()

def main(start: bool) -> dict:
    if start:
        go.set()
        import time
        time.sleep(0.1)  # the thread's request is with the server now
        return {"seen": list(seen)}
    return {"seen": list(seen), "own": call("fast", {})}
"""
    host = Host({"slow": "slow answer", "fast": "fast answer"}, delay=0.3)
    first = await run(runner, late, host, start=True)
    assert first.value == {"seen": []}
    second = await run(runner, late, host, start=False)
    assert second.ok, second
    assert second.value["own"] == "fast answer"
    # The same worker (the thread's list survived): the thread was told its call had ended,
    # and the answer that came later went nowhere.
    assert second.value["seen"] == ["the call has ended: no knowledge can be called now"]
    assert host.calls == [("slow", {}), ("fast", {})]


# -- through the executor: code nodes and function tools, with the run's knowledge port --------

QUERY = KnowledgeTool(
    "query_table", "Query the sales table.", {"type": "object"}, "table.query",
    {"table_ids": ["table.sales"]},
)  # fmt: skip
CHANGE = KnowledgeTool(
    "update_object", "Change a customer.", {"type": "object"}, "ontology.update_object",
    {"ontology_ids": ["ontology.crm"]}, confirm=True,
)  # fmt: skip
PLANTED = """
from dhub_knowledge import call

def main(month: int) -> dict:
    rows = call("query_table", {"where": f"month = {month}", "table_ids": ["table.theirs"],
                                "run_id": "run.someone-elses"})
    return {"total": sum(r["units"] for r in rows["rows"])}
"""


def _code_workflow(source: str, kind: str = "number") -> dict[str, Any]:
    return {
        "name": "sales", "description": "", "mode": "workflow", "input_mode": "event",
        "nodes": [
            {"id": "start", "type": "start",
             "config": {"variables": [{"name": "month", "type": "number"}]}},
            {"id": "sum", "type": "code",
             "config": {"source": source, "input_mappings": {"month": "{{ month }}"}}},
            {"id": "end", "type": "end",
             "config": {"outputs": [{"name": "total", "type": kind,
                                     "value": "{{ total }}"}]}},
        ],
        "edges": [{"source": "start", "target": "sum"}, {"source": "sum", "target": "end"}],
    }  # fmt: skip


async def _workflow_run(
    source: str, knowledge: list[KnowledgeTool], port: Any, server: bool = True,
    kind: str = "number", live: list[dict[str, Any]] | None = None,
) -> RunResult:  # fmt: skip
    resolved = ResolvedAgent("", knowledge=knowledge)
    functions = SandboxFunctions(SandboxRunner(sandbox_settings()), "t", server=server)
    try:
        async with asyncio.timeout(30):
            return await run_workflow(
                compile_agent(_code_workflow(source, kind), None, resolved), {"month": 5},
                functions=functions, model=Model().port, clock=RealClock(), human=Person(),
                knowledge=port, live=None if live is None else live.append,
            )  # fmt: skip
    finally:
        await functions.close()


async def test_a_code_node_sums_rows_it_queried_with_the_bound_ids_over_its_own() -> None:
    shelf = Shelf({"table.query": ROWS})
    shown: list[dict[str, Any]] = []
    result = await _workflow_run(PLANTED, [QUERY, CHANGE], shelf, live=shown)
    assert result.status == "succeeded", result.error
    assert result.outputs == {"total": 7}
    assert shown == [{"type": "knowledge.called", "node_id": "sum", "name": "query_table",
                      "arguments": {"where": "month = 5", "table_ids": ["table.theirs"],
                                    "run_id": "run.someone-elses"}, "ok": True}]  # fmt: skip
    [sent] = shelf.calls
    assert sent.operation == "table.query" and sent.node_id == "sum"
    # The agent's ids win over the ones the code planted; the run's id is the port's own
    # (services/knowledge.py puts the real one over whatever is there).
    assert sent.arguments == {"where": "month = 5", "table_ids": ["table.sales"],
                              "run_id": "run.someone-elses"}  # fmt: skip


async def test_unknown_and_changing_tools_are_refused_from_code() -> None:
    probe = """
from dhub_knowledge import KnowledgeError, call

def main(month: int) -> dict:
    said = []
    for name in ("drop_table", "update_object"):
        try:
            call(name, {"key": "c-1"})
        except KnowledgeError as exc:
            said.append(str(exc))
    return {"total": said}
"""
    shelf = Shelf({"table.query": ROWS, "ontology.update_object": {"updated": "c-1"}})
    shown: list[dict[str, Any]] = []
    result = await _workflow_run(probe, [QUERY, CHANGE], shelf, kind="array", live=shown)
    assert result.status == "succeeded", result.error
    unknown, changing = result.outputs["total"]
    assert [(e["name"], e["ok"], e["error"]) for e in shown] == [
        ("drop_table", False, unknown), ("update_object", False, changing)]  # fmt: skip
    assert unknown == ("No knowledge tool 'drop_table': the agent's tables, templates and "
                       "ontologies give its code these: query_table, update_object.")  # fmt: skip
    assert changing.startswith("'update_object' changes data, so a person confirms each call")
    assert shelf.calls == []


async def test_a_refusal_of_the_port_fails_the_node_with_its_message() -> None:
    shelf = Shelf({"table.query": ValueError("No table 'table.sales' that you can read.")})
    result = await _workflow_run(PLANTED, [QUERY], shelf)
    assert result.status == "failed"
    assert result.error is not None and result.error["node_id"] == "sum"
    assert result.error["message"] == "KnowledgeError: No table 'table.sales' that you can read."


async def test_without_knowledge_code_is_told_what_is_missing() -> None:
    none = await _workflow_run(PLANTED, [], Shelf({}))
    assert none.error is not None
    assert none.error["message"] == (
        "KnowledgeError: No knowledge tool 'query_table': the agent lists no tables, "
        "templates or ontologies whose tools its code could call.")  # fmt: skip
    for knowledge in ([], [QUERY]):  # `dhub run FILE`: no server, so no knowledge
        outside = await _workflow_run(PLANTED, knowledge, NoKnowledge(), server=False)
        assert outside.error is not None
        assert "needs the dhub server: tables, templates and ontologies live in its database" \
            in outside.error["message"]  # fmt: skip


async def test_a_react_agents_function_tool_calls_the_agents_knowledge() -> None:
    tool = {"name": "may_total", "description": "Units sold in May.",
            "function": {"source": PLANTED.replace("def main(month: int)",
                                                   "def may_total(month: int)")}}  # fmt: skip
    model = Model(Reply(tool_calls=[call("may_total", {"month": 5}, "c1")]), "7 units.")
    shelf = Shelf({"table.query": ROWS})
    resolved = ResolvedAgent("Help.", [AgentToolConfig.model_validate(tool)], knowledge=[QUERY])
    functions = SandboxFunctions(SandboxRunner(sandbox_settings()), "t")
    try:
        async with asyncio.timeout(30):
            result = await run_workflow(
                compile_agent(agent([tool]), None, resolved), {}, functions=functions,
                model=model.port, clock=RealClock(), human=Person(), knowledge=shelf,
                context={"message": "How much in May?"},
            )  # fmt: skip
    finally:
        await functions.close()
    assert result.status == "succeeded", result.error
    assert events(result, "tool.succeeded")[0]["result"] == {"total": 7}
    assert [c.arguments["table_ids"] for c in shelf.calls] == [["table.sales"]]


def test_a_function_call_carrying_knowledge_is_journaled_and_read_back() -> None:
    graph = compile_agent(_code_workflow(PLANTED), None, ResolvedAgent("", knowledge=[QUERY]))
    command = CallFunction("c1", "sum", PLANTED, {"month": 5}, 30,
                           knowledge=graph.code_knowledge)  # fmt: skip
    assert command.knowledge == ({"name": "query_table", "operation": "table.query",
                                  "bound": {"table_ids": ["table.sales"]},
                                  "confirm": False},)  # fmt: skip
    stored = json.loads(json.dumps(journal.command_payload(command)))
    assert journal.command_from("call_function", stored) == command
    old = {k: v for k, v in stored.items() if k != "knowledge"}  # journaled before this
    assert journal.command_from("call_function", old).knowledge == ()


async def test_without_isolation_too() -> None:
    """DHUB_SANDBOX=unsafe: the child program's files load from the server's package, and
    nothing of it lands on the function's sys.path."""
    runner = SandboxRunner(sandbox_settings(isolation="unsafe"))
    try:
        source = SUM + "\nimport sys\n\ndef paths() -> list:\n    return sys.path\n"
        host = Host({"query_table": ROWS})
        result = await runner.call(FunctionCall(source, {"month": 5}, 10, entry="main",
                                                owner="t", host=host))  # fmt: skip
        assert result.value == {"total": 7}, result
        paths = await runner.call(FunctionCall(source, {}, 10, entry="paths", owner="t"))
        assert not any(p.endswith("dhub/sandbox") for p in paths.value), paths
    finally:
        await runner.close()


async def test_a_big_answer_crossing_a_big_result_does_not_block(runner: SandboxRunner) -> None:
    """A thread's call is answered (90 kB, more than a pipe holds) while the function's own
    90 kB result is on its way back: neither side waits for the other."""
    crossing = """
import threading, time
from dhub_knowledge import KnowledgeError, call

go = threading.Event()

def ask():
    while True:
        go.wait()
        go.clear()
        try:
            call("big", {})
        except KnowledgeError:
            pass

threading.Thread(target=ask, daemon=True).start()

def main() -> str:
    go.set()
    time.sleep(0.05)
    return "y" * 90_000
"""
    host = Host({"big": "x" * 90_000}, delay=0.2)
    result = await run(runner, crossing, host, seconds=5)
    assert result.ok, result
    assert len(result.value) == 90_000 and len(host.calls) == 1
    assert (await run(runner, crossing, host, seconds=5)).ok  # the next call, too
