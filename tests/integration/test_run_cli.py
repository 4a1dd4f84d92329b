"""``dhub run FILE``: workflows run in-process from the command line, no server and no token.

Through typer's CliRunner (``input=`` is the person at the terminal) and once as a real
process. Outputs are JSON on stdout; the live view, prompts and errors go to stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner, Result

from dhub.cli.main import app
from dhub.observability import traces
from tests.conftest import FIXTURES, ROOT, load_json

TRIAGE = FIXTURES / "valid" / "workflow_triage.json"
BATCH = FIXTURES / "valid" / "workflow_batch.json"
SUMMARIZER = FIXTURES / "valid" / "event_summarizer.json"
REACT = FIXTURES / "valid" / "react_support.json"


def dhub(*args: str | Path, input: str | None = None) -> Result:
    return CliRunner().invoke(app, ["run", *map(str, args)], input=input)


def outputs(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def workflow(nodes: list[dict[str, Any]], edges: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "name": "cli-flow",
        "description": "",
        "mode": "workflow",
        "input_mode": "event",
        "nodes": nodes,
        "edges": [{"source": s, "target": t} for s, t in edges],
    }


def echo_inputs(**variables: str) -> dict[str, Any]:
    """start(name: type, ...) -> end, which returns every input as it arrived."""
    declared = [{"name": n, "type": t} for n, t in variables.items()]
    returned = [{"name": n, "type": t, "value": f"{{{{ {n} }}}}"} for n, t in variables.items()]
    return workflow(
        [
            {"id": "start", "type": "start", "config": {"variables": declared}},
            {"id": "end", "type": "end", "config": {"outputs": returned}},
        ],
        [("start", "end")],
    )


# -- the shared fixtures ------------------------------------------------------------------------


def test_examples_are_the_fixtures() -> None:
    assert load_json(ROOT / "examples" / "ticket_triage.json") == load_json(TRIAGE)
    assert load_json(ROOT / "examples" / "batch_scores.json") == load_json(BATCH)


def test_triage_routine_ticket() -> None:
    result = dhub(TRIAGE, "--input", "ticket=Checkout page shows an error")
    assert outputs(result) == {"category": "bug", "summary": "bug from anonymous"}
    assert "✓ classify" in result.stderr and "○ approve" in result.stderr  # the live view


def test_triage_urgent_ticket_asks_at_the_terminal() -> None:
    args = ("--input", "ticket=Total outage since 9am", "--input", "customer=acme")
    result = dhub(TRIAGE, *args, input="maybe\ny\n\n")  # a refused answer, yes, no note
    assert outputs(result) == {
        "category": "bug",
        "summary": "URGENT bug from acme; escalate=True",
    }
    assert "Escalate ticket from acme: Total outage since 9am?" in result.stderr
    assert "escalate (Page the on-call engineer?) [y/n]:" in result.stderr
    assert "answer y or n" in result.stderr
    assert "note (Note for the engineer) [empty to skip]:" in result.stderr


def test_triage_without_an_answer_fails_clearly() -> None:
    result = dhub(TRIAGE, "-i", "ticket=site down", input="")
    assert result.exit_code == 1
    assert "no answer for 'approve': standard input ended" in result.stderr
    assert result.stdout == ""


def test_batch_runs_loops_parallel_branches_and_retries() -> None:
    result = dhub(BATCH, "--input", "numbers=[1, 2, 3]")
    assert outputs(result) == {"total": 14, "report": "#0: 1\n#1: 4\n#2: 9\n", "checked": False}
    assert "square [each#2]" in result.stderr
    assert "sum_squares [aggregate@total]" in result.stderr
    assert "↻ flaky" in result.stderr and "(handled by guard)" in result.stderr


def test_a_run_from_the_command_line_is_traced_when_tracing_is_on() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traces.install(provider)  # what OTEL_EXPORTER_OTLP_ENDPOINT sets up, in memory
    try:
        result = dhub(BATCH, "--input", "numbers=[1, 2]")
    finally:
        traces.uninstall()
    assert outputs(result)["total"] == 5
    spans = {s.context.span_id: s for s in exporter.get_finished_spans()}
    [top] = [s for s in spans.values() if s.name == "workflow batch-scores"]
    assert (top.attributes or {})["dhub.run.status"] == "succeeded"
    squares = [s for s in spans.values() if s.name == "node square"]
    assert len(squares) == 2 and all(s.context.trace_id == top.context.trace_id for s in squares)
    loop = spans[squares[0].parent.span_id]  # type: ignore[union-attr]
    assert loop.name == "node each" and loop.parent.span_id == top.context.span_id  # type: ignore[union-attr]


def test_the_otel_variables_trace_a_run_from_the_command_line() -> None:
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "dhub-cli"}
    done = subprocess.run(
        [ROOT / ".venv" / "bin" / "dhub", "run", "examples/ticket_triage.json",
         "--input", "ticket=Checkout page shows an error"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"category": "bug", "summary": "bug from anonymous"}
    assert '"name": "workflow ticket-triage"' in done.stderr  # the spans, on stderr
    assert '"name": "node classify"' in done.stderr and '"service.name": "dhub-cli"' in done.stderr


def test_a_real_process_runs_the_example() -> None:
    done = subprocess.run(
        [ROOT / ".venv" / "bin" / "dhub", "run", "examples/ticket_triage.json",
         "--input", "ticket=Checkout page shows an error"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"category": "bug", "summary": "bug from anonymous"}
    assert "✓ end" in done.stderr


# -- inputs -------------------------------------------------------------------------------------


def test_input_values_are_json_when_they_parse_and_text_for_strings(tmp_path: Path) -> None:
    doc = write(tmp_path / "echo.json", echo_inputs(n="number", tags="array", s="string"))
    result = dhub(doc, "-i", "n=3", "-i", 'tags=["a", 1]', "-i", "s=123")
    assert outputs(result) == {"n": 3, "tags": ["a", 1], "s": "123"}


def test_inputs_json_is_overridden_by_input(tmp_path: Path) -> None:
    doc = write(tmp_path / "echo.yaml", echo_inputs(n="number", s="string"))  # JSON is YAML
    given = write(tmp_path / "inputs.json", {"n": 1, "s": "from file"})
    assert outputs(dhub(doc, "--inputs-json", given, "-i", "n=2")) == {"n": 2, "s": "from file"}


def test_bad_inputs_are_usage_errors(tmp_path: Path) -> None:
    missing = dhub(TRIAGE)
    assert missing.exit_code == 2
    assert "'ticket' is required (string)" in missing.stderr
    assert "The workflow takes: ticket (string), customer (string, optional)" in missing.stderr
    assert dhub(TRIAGE, "-i", "ticket").exit_code == 2
    not_an_object = write(tmp_path / "inputs.json", [1])
    assert dhub(TRIAGE, "--inputs-json", not_an_object).exit_code == 2


# -- documents ----------------------------------------------------------------------------------


def test_an_invalid_document_lists_every_problem(tmp_path: Path) -> None:
    doc = workflow([{"id": "start", "type": "start", "config": {}}], [("start", "nope")])
    result = dhub(write(tmp_path / "bad.json", doc))
    assert result.exit_code == 2
    assert "is not a valid agent (2 problems):" in result.stderr
    assert "  /edges/0/target: No node has the id 'nope'" in result.stderr
    assert "  /nodes: A workflow needs at least one end node" in result.stderr


def test_react_agents_and_unreadable_files_are_refused(tmp_path: Path) -> None:
    react = dhub(REACT)
    assert react.exit_code == 2 and "runs workflow agents only" in react.stderr
    assert dhub(tmp_path / "missing.json").exit_code == 2


# -- failures and models ------------------------------------------------------------------------


def test_a_failed_run_exits_1_with_the_error(tmp_path: Path) -> None:
    raises = "def main():\n    raise ValueError('bad ticket')\n"
    doc = workflow(
        [
            {"id": "start", "type": "start", "config": {}},
            {"id": "check", "type": "code", "config": {"source": raises}},
            {"id": "end", "type": "end", "config": {}},
        ],
        [("start", "check"), ("check", "end")],
    )
    result = dhub(write(tmp_path / "fails.json", doc))
    assert result.exit_code == 1
    assert "Error: node 'check' failed (exception): ValueError: bad ticket" in result.stderr
    assert result.stdout == ""


def test_llm_nodes_without_a_provider_say_what_to_set_or_take_scripted_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DHUB_OPENAI_API_KEY", "DHUB_OPENAI_BASE_URL", "DHUB_ANTHROPIC_API_KEY",
                 "DHUB_ANTHROPIC_BASE_URL", "DHUB_PROVIDERS_FILE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    alert = ("-i", 'alert={"host": "db-1"}')
    without = dhub(SUMMARIZER, *alert)
    assert without.exit_code == 1
    assert "set DHUB_OPENAI_API_KEY" in without.stderr and "--model-replies" in without.stderr
    replies = write(tmp_path / "replies.json", ["Disk full on db-1"])
    assert outputs(dhub(SUMMARIZER, *alert, "--model-replies", replies)) == {
        "headline": "Disk full on db-1"
    }


# -- the person at the terminal -----------------------------------------------------------------


def form() -> dict[str, Any]:
    fields = [
        {"name": "level", "type": "string", "options": ["low", "high"]},
        {"name": "count", "type": "number"},
        {"name": "ok", "type": "boolean"},
        {"name": "extra", "type": "object"},
        {"name": "note", "type": "string", "required": False},
    ]
    ask = {"prompt": "Fill in {{ who }}", "input_fields": fields}
    returned = [
        {"name": "level", "type": "string", "value": "{{ level }}"},
        {"name": "count", "type": "number", "value": "{{ count }}"},
        {"name": "ok", "type": "boolean", "value": "{{ ok }}"},
        {"name": "extra", "type": "object", "value": "{{ extra }}"},
        {"name": "note", "type": "string", "value": "{{ note or 'none' }}"},
    ]
    return workflow(
        [
            {"id": "start", "type": "start", "config": {"variables": [
                {"name": "who", "type": "string"}]}},
            {"id": "ask", "type": "human_input", "config": ask},
            {"id": "end", "type": "end", "config": {"outputs": returned}},
        ],
        [("start", "ask"), ("ask", "end")],
    )  # fmt: skip


def test_human_fields_are_asked_one_by_one_and_typed(tmp_path: Path) -> None:
    answers = 'medium\nhigh\nthree\n2.5\nmaybe\nn\n[1]\n{"k": 1}\n\n'
    result = dhub(write(tmp_path / "form.json", form()), "-i", "who=ann", input=answers)
    assert outputs(result) == {
        "level": "high", "count": 2.5, "ok": False, "extra": {"k": 1}, "note": "none",
    }  # fmt: skip
    assert "Fill in ann" in result.stderr
    assert "level [low/high]:" in result.stderr
    for complaint in ("choose one of low, high", "answer a number", "answer y or n",
                      "answer a JSON object"):  # fmt: skip
        assert complaint in result.stderr


def refund() -> dict[str, Any]:
    actor = {
        "name": "issue_refund",
        "confirmation_policy": "confirm",
        "function": {"source": "def issue_refund(amount):\n    return {'refunded': amount}\n"},
    }
    return workflow(
        [
            {"id": "start", "type": "start", "config": {"variables": [
                {"name": "amount", "type": "number"}]}},
            {"id": "pay", "type": "actor_call", "config": {
                "actor": actor, "input_mappings": {"amount": "{{ amount }}"}}},
            {"id": "end", "type": "end", "config": {"outputs": [
                {"name": "refunded", "type": "number", "value": "{{ result.refunded }}"}]}},
        ],
        [("start", "pay"), ("pay", "end")],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("answers", "status", "says"),
    [("y\n", 0, '"refunded": 50'), ("n\ntoo much\n", 1, "rejected the call: too much")],
)
def test_actor_calls_are_confirmed_at_the_terminal(
    tmp_path: Path, answers: str, status: int, says: str
) -> None:
    result = dhub(write(tmp_path / "refund.json", refund()), "-i", "amount=50", input=answers)
    assert result.exit_code == status
    assert 'run actor issue_refund with {"amount": 50}?' in result.stderr
    assert says in (result.stdout if status == 0 else result.stderr)


def test_code_calling_knowledge_is_told_it_needs_the_server(tmp_path: Path) -> None:
    source = ("from dhub_knowledge import call\n\n"
              "def main():\n    return {'rows': call('query_table', {})}\n")  # fmt: skip
    doc = workflow(
        [
            {"id": "start", "type": "start", "config": {}},
            {"id": "ask", "type": "code", "config": {"source": source}},
            {"id": "end", "type": "end", "config": {"outputs": []}},
        ],
        [("start", "ask"), ("ask", "end")],
    )
    result = dhub(write(tmp_path / "flow.json", doc), "--json")
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["message"] == (
        "KnowledgeError: Knowledge ('query_table') needs the dhub server: tables, templates "
        "and ontologies live in its database (run the agent there, e.g. `dhub agents run`)."
    )
