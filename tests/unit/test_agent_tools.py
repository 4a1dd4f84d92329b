"""Agents as MCP tools (services/agent_tools.py): tool names, input schemas and what a call
answers for each state of its run. The endpoint itself: tests/integration/test_mcp_server.py."""

from __future__ import annotations

from typing import Any

import pytest

from dhub.services.agent_tools import input_schema, outcome, tool_names
from dhub.settings import Settings
from dhub.store.runs import RunRecord


def test_tool_names_are_valid_and_unique() -> None:
    names = tool_names([
        ("agent.A", "Ticket triage"), ("agent.B", "triage"), ("agent.C", "triage"),
        ("agent.D", "ünïcode/ä"), ("agent.E", "x" * 300), ("agent.F", "!!!"),
    ])  # fmt: skip
    assert names == {
        "agent.A": "Ticket_triage", "agent.B": "triage__B", "agent.C": "triage__C",
        "agent.D": "n_code", "agent.E": "x" * 128, "agent.F": "agent",
    }  # fmt: skip


def test_start_variables_become_a_json_schema() -> None:
    spec = {"mode": "workflow", "input_mode": "event", "nodes": [
        {"id": "start", "type": "start", "config": {"variables": [
            {"name": "n", "type": "number"}, {"name": "flag", "type": "boolean",
                                             "required": False},
            {"name": "rows", "type": "array", "description": "the rows", "default": []},
            {"name": "extra", "type": "object"}]}}]}  # fmt: skip
    assert input_schema(spec) == {
        "type": "object",
        "properties": {
            "n": {"type": "number"}, "flag": {"type": "boolean"},
            "rows": {"type": "array", "description": "the rows", "default": []},
            "extra": {"type": "object"},
        },
        "required": ["n", "extra"],
    }  # fmt: skip
    react = input_schema({"mode": "react", "input_mode": "event"})
    assert react["properties"] == {"message": {"type": "string", "description": "What to do."}}


def run(status: str, **fields: Any) -> RunRecord:
    values: dict[str, Any] = {
        "id": "run.1", "agent_id": "agent.A", "agent_version": 1, "user_id": "user.u",
        "status": status, "waiting": None, "inputs": {}, "outputs": None, "error": None,
        "usage": {}, "conversation_id": None, "idempotency_key": None, "step_count": 1,
        "event_count": 0, "created_at": 0, "started_at": None, "finished_at": None,
        "updated_at": 0, "lease_owner": None, "lease_expires_at": None,
    }  # fmt: skip
    return RunRecord(**{**values, **fields})


def test_a_run_still_going_when_the_wait_is_over_says_where_to_follow_it() -> None:
    done = outcome(run("running"), None, "http://h")
    assert not done.error
    assert done.result == {"run_id": "run.1", "status": "running",
                           "run_url": "http://h/api/v1/runs/run.1"}  # fmt: skip
    assert done.text.startswith("Run 'run.1' is still running; read it at http://h/api/v1/")


def test_a_confirmation_is_answered_at_its_call() -> None:
    waiting = {"for": "confirmation", "node_id": "agent", "frame": "", "command_id": "call.7"}
    done = outcome(run("waiting", waiting=waiting), "conversation.c", "http://h")
    assert not done.error and done.result["conversation_id"] == "conversation.c"
    assert done.result["answer_url"] == "http://h/api/v1/runs/run.1/confirmations/call.7"


def test_a_cancelled_run_is_an_error() -> None:
    done = outcome(run("cancelled", error=None), None, "http://h")
    assert done.error and done.text == "Run 'run.1' was cancelled."


def test_the_wait_is_bounded(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="DHUB_MCP_WAIT_SECONDS"):
        Settings(data_dir=tmp_path, database_url="sqlite://", mcp_wait_seconds=0)
