"""Traces of runs (docs/observability.md), captured with the SDK's in-memory exporter on SQLite
and PostgreSQL: a react run with a tool and a workflow with a loop (span names, parents, GenAI
attributes), an incoming ``traceparent`` continued into the run, content recorded only when
asked, and a run resumed after a restart linked to the execution before it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

from dhub.observability import traces
from dhub.settings import Settings
from tests.conftest import FIXTURES, load_json
from tests.integration.test_react_runs_api import (
    API,
    DONE,
    LOOKUP,
    REFUND,
    SUPPORT,
    approve,
    say,
    server,
)
from tests.integration.test_runs_api import BATCH, create, ok, until

SUMMARIZER = load_json(FIXTURES / "valid" / "event_summarizer.json")
INPUTS = {"alert": {"service": "checkout", "errors": 12}}

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traces.install(provider)
    yield exporter
    traces.uninstall()
    provider.shutdown()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if (s.name or "").startswith(prefix)]


def parent_of(exporter: InMemorySpanExporter, span: ReadableSpan) -> ReadableSpan:
    assert span.parent is not None, span.name
    by_id = {s.context.span_id: s for s in exporter.get_finished_spans()}
    return by_id[span.parent.span_id]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_react_run_with_a_tool(settings: Settings, spans: InMemorySpanExporter) -> None:
    with server(settings, [LOOKUP, "It shipped yesterday."]) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        _, run_id = say(client, agent, "Where is order A-1001?")
        assert until(client, run_id, "succeeded", "failed")["status"] == "succeeded"
    [run] = named(spans, "invoke_agent ")
    assert run.name == f"invoke_agent {SUPPORT['name']}"
    assert attrs(run)["dhub.run.id"] == run_id and attrs(run)["dhub.run.status"] == "succeeded"
    assert attrs(run)["gen_ai.operation.name"] == "invoke_agent"
    first, second = sorted(named(spans, "chat "), key=lambda s: s.start_time or 0)
    node = parent_of(spans, first)
    assert node.name.startswith("node ") and attrs(node)["dhub.node.type"] == "agent"
    assert parent_of(spans, node) is run and parent_of(spans, second) is node
    model = SUPPORT["agent"]["model"]
    assert first.name == f"chat {model}"
    got = attrs(first)
    assert got["gen_ai.operation.name"] == "chat"
    assert got["gen_ai.provider.name"] == got["gen_ai.system"] == "openai"
    assert got["gen_ai.request.model"] == model and got["gen_ai.response.model"]
    assert got["gen_ai.usage.input_tokens"] > 0 and got["gen_ai.usage.output_tokens"] > 0
    assert got["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert "gen_ai.input.messages" not in got  # content only when the operator asks
    assert got["dhub.cost_usd"] > 0 and attrs(second)["dhub.cost_usd"] > 0  # priced, USD
    calls = (got, attrs(second))
    assert attrs(run)["gen_ai.usage.input_tokens"] == sum(
        c["gen_ai.usage.input_tokens"] for c in calls
    )
    assert attrs(run)["dhub.cost_usd"] == pytest.approx(sum(c["dhub.cost_usd"] for c in calls))
    [tool] = named(spans, "execute_tool ")
    assert tool.name == "execute_tool lookup_order" and parent_of(spans, tool) is node
    assert attrs(tool)["gen_ai.tool.name"] == "lookup_order"
    assert attrs(tool)["gen_ai.tool.call.id"] == "l1"
    assert first.end_time <= tool.start_time and tool.end_time <= second.start_time  # type: ignore[operator]
    assert {s.context.trace_id for s in (run, node, first, tool)} == {run.context.trace_id}


def test_a_workflow_with_a_loop(settings: Settings, spans: InMemorySpanExporter) -> None:
    with server(settings, []) as client:
        batch = create(client, BATCH)
        run = ok(client.post(f"{API}/agents/{batch}/runs", json={"inputs": {"numbers": [1, 2]}}),
                 202)  # fmt: skip
        assert until(client, run["id"], "succeeded", "failed")["status"] == "succeeded"
    [top] = named(spans, "workflow ")
    assert top.name == "workflow batch-scores" and attrs(top)["gen_ai.operation.name"] == "workflow"
    nodes = named(spans, "node ")
    [loop] = [s for s in nodes if s.name == "node each"]
    assert attrs(loop)["dhub.node.type"] == "loop" and parent_of(spans, loop) is top
    squares = [s for s in nodes if s.name == "node square"]
    assert sorted(attrs(s)["dhub.node.frame"] for s in squares) == ["each#0", "each#1"]
    assert all(parent_of(spans, s) is loop for s in squares)
    [total] = [s for s in nodes if s.name == "node sum_squares"]
    assert parent_of(spans, total).name == "node aggregate"  # a parallel's branch
    flaky = sorted((s for s in nodes if s.name == "node flaky"), key=lambda s: s.start_time or 0)
    assert [attrs(s)["dhub.node.outcome"] for s in flaky] == ["retrying", "retrying", "failed"]
    assert all(s.status.status_code.name == "ERROR" for s in flaky)
    assert attrs(flaky[-1])["error.type"] == "exception"
    # Nodes that only move data (start, end, variable) get no span unless they fail; the
    # run's events have them.
    assert {attrs(s)["dhub.node.type"] for s in nodes}.isdisjoint({"start", "end", "variable"})
    # The step writes (shared by many runs' steps) are not traced as this run's statements.
    in_run = {top.context.span_id} | {s.context.span_id for s in nodes}
    sql = [s for s in spans.get_finished_spans() if s.instrumentation_scope
           and "sqlalchemy" in s.instrumentation_scope.name]  # fmt: skip
    assert not [s for s in sql if s.parent is not None and s.parent.span_id in in_run]
    assert not [s for s in sql if "run_events" in str(attrs(s).get("db.statement", ""))]


def test_an_llm_nodes_span_is_its_model_call(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    with server(settings, ["A short summary."]) as client:
        agent = create(client, SUMMARIZER)
        run = ok(client.post(f"{API}/agents/{agent}/runs", json={"inputs": INPUTS}), 202)
        assert until(client, run["id"], "succeeded", "failed")["status"] == "succeeded"
    [top] = named(spans, "workflow ")
    [call] = named(spans, "chat ")
    assert not named(spans, "node ")  # start, end: quiet; summarize: the chat span is its own
    assert parent_of(spans, call) is top
    assert attrs(call)["dhub.node.id"] == "summarize" and attrs(call)["dhub.node.type"] == "llm"
    assert attrs(call)["gen_ai.usage.output_tokens"] > 0


class _DropRuns(Sampler):
    """Leaves out every run's span and keeps everything else, whatever its parent."""

    def should_sample(self, parent_context: Any, trace_id: int, name: str, *args: Any,
                      **kwargs: Any) -> SamplingResult:  # fmt: skip
        drop = name.startswith(("invoke_agent ", "workflow "))
        return SamplingResult(Decision.DROP if drop else Decision.RECORD_AND_SAMPLE)

    def get_description(self) -> str:
        return "drop runs"


def test_a_run_the_sampler_leaves_out_records_nothing(settings: Settings) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=_DropRuns())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traces.install(provider)
    try:
        with server(settings, [LOOKUP, "It shipped."]) as client:
            agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
            _, run_id = say(client, agent, "Where is order A-1001?")
            assert until(client, run_id, "succeeded", "failed")["status"] == "succeeded"
            inside = ok(client.get(f"{API}/runs/{run_id}"))
    finally:
        traces.uninstall()
    assert inside["status"] == "succeeded"
    # Nothing of the run (nodes, model and tool calls), though the sampler would keep them.
    recorded = {s.name for s in exporter.get_finished_spans()}
    assert not {n for n in recorded if n.startswith(("node ", "chat ", "execute_tool "))}


def test_a_quiet_node_that_fails_has_its_span(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    doc = {"name": "bad-branch", "description": "A branch that cannot be decided.",
           "mode": "workflow", "input_mode": "event",
           "nodes": [{"id": "start", "type": "start", "config": {}},
                     {"id": "pick", "type": "if_else", "config": {"condition": "1 / 0 > 1"}},
                     {"id": "end", "type": "end", "config": {}}],
           "edges": [{"source": "start", "target": "pick"},
                     {"source": "pick", "target": "end", "condition": "true"},
                     {"source": "pick", "target": "end", "condition": "false"}]}  # fmt: skip
    with server(settings, []) as client:
        agent = create(client, doc)
        run = ok(client.post(f"{API}/agents/{agent}/runs", json={"inputs": {}}), 202)
        assert until(client, run["id"], "succeeded", "failed")["status"] == "failed"
    [top] = named(spans, "workflow ")
    [pick] = named(spans, "node ")
    assert pick.name == "node pick" and parent_of(spans, pick) is top
    assert attrs(pick)["dhub.node.outcome"] == "failed" and "dhub.node.resumed" not in attrs(pick)
    assert pick.status.status_code.name == "ERROR"


def test_an_incoming_traceparent_continues_into_the_run(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    with server(settings, ["Hello."]) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        chat = ok(client.post(f"{API}/agents/{agent}/conversations"), 201)
        header = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
        run = ok(client.post(f"{API}/conversations/{chat['id']}/messages",
                             json={"content": "hi"}, headers=header), 202)  # fmt: skip
        assert until(client, run["id"], "succeeded", "failed")["status"] == "succeeded"
    [top] = named(spans, "invoke_agent ")
    assert format(top.context.trace_id, "032x") == TRACE_ID
    request = parent_of(spans, top)  # the request that started it (FastAPI's server span)
    while request.parent is not None and request.parent.span_id in {
        s.context.span_id for s in spans.get_finished_spans()
    }:
        request = parent_of(spans, request)
    assert request.parent is not None and format(request.parent.span_id, "016x") == PARENT_ID
    assert request.parent.is_remote
    sql = [s for s in spans.get_finished_spans() if s.instrumentation_scope
           and "sqlalchemy" in s.instrumentation_scope.name]  # fmt: skip
    assert sql  # the database is instrumented too


def test_content_is_recorded_when_asked(settings: Settings) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traces.install(provider, capture=True)
    try:
        with server(settings, [LOOKUP, "It shipped."]) as client:
            agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
            _, run_id = say(client, agent, "Where is order A-1001?")
            assert until(client, run_id, "succeeded", "failed")["status"] == "succeeded"
    finally:
        traces.uninstall()
    first, second = sorted(named(exporter, "chat "), key=lambda s: s.start_time or 0)
    assert "Where is order A-1001?" in str(attrs(first)["gen_ai.input.messages"])
    assert "lookup_order" in str(attrs(first)["gen_ai.output.messages"])
    assert "It shipped." in str(attrs(second)["gen_ai.output.messages"])
    [tool] = named(exporter, "execute_tool ")
    assert "A-1001" in str(attrs(tool)["gen_ai.tool.call.arguments"])


def test_a_run_resumed_after_a_restart_links_to_its_earlier_spans(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    with server(settings, [LOOKUP, REFUND]) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        _, run_id = say(client, agent, "Please refund order A-1001")
        assert until(client, run_id, "waiting", "failed")["status"] == "waiting"
    [before] = named(spans, "invoke_agent ")
    assert attrs(before)["dhub.run.status"] in ("parked", "stopped", "interrupted")
    with server(settings, [DONE]) as client:  # a new server process
        approve(client, run_id)
        assert until(client, run_id, "succeeded", "failed")["status"] == "succeeded"
    first, after = sorted(named(spans, "invoke_agent "), key=lambda s: s.start_time or 0)
    assert first is before and attrs(after)["dhub.run.resumed"] is True
    assert after.context.trace_id == before.context.trace_id
    assert [link.context.span_id for link in after.links] == [before.context.span_id]
    assert attrs(after)["dhub.run.status"] == "succeeded"
    [node] = [s for s in named(spans, "node ")  # started before the restart: opened anew
              if parent_of(spans, s) is after and attrs(s).get("dhub.node.resumed")]  # fmt: skip
    assert attrs(node)["dhub.node.type"] == "agent"
    [last] = [s for s in named(spans, "chat ") if parent_of(spans, s) is node]
    assert attrs(last)["gen_ai.response.finish_reasons"] == ("stop",)
