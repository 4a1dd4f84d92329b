"""A run's ``usage`` (GET /api/v1/runs/{id}) sums every model call it made: llm nodes, react
iterations, compaction summaries and delegates, in total and by model. The models are the real
OpenAI SDK against the local wire-protocol server, which reports exact token counts. SQLite and
PostgreSQL."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.settings import Settings
from tests.integration.test_llm_runs_api import ALERT, SUMMARIZER, app_client
from tests.integration.test_runs_api import ok, until
from tests.support.wire import OpenAIReply
from tests.support.wire import openai_wire as ow
from tests.support.wire.openai_wire import OpenAIServer

API = "/api/v1"


@pytest.fixture
def api(settings: Settings, openai_server: OpenAIServer) -> Iterator[TestClient]:
    entry = EntryConfig(type="openai", base_url=openai_server.base_url,
                        api_key=openai_server.api_key)  # type: ignore[arg-type]  # fmt: skip
    with app_client(settings, ProvidersConfig(entries={"openai": entry})) as client:
        yield client


def counts(
    inp: int, out: int, reasoning: int = 0, cached: int = 0, *, cost: float, **more: Any
) -> dict[str, Any]:
    """Token counts and their cost in millionths of a dollar (the price table: gpt-4o-mini
    $0.15 a million input tokens, $0.075 cached, $0.60 output; gpt-4.1 $2 and $8; gpt-4.1-mini
    $0.40 and $1.60)."""
    return {"input_tokens": inp, "output_tokens": out, "reasoning_tokens": reasoning,
            "cached_tokens": cached, "total_tokens": inp + out,
            "cost_usd": pytest.approx(cost / 1e6), **more}  # fmt: skip


def test_two_llm_nodes_on_two_models(api: TestClient, openai_server: OpenAIServer) -> None:
    doc = copy.deepcopy(SUMMARIZER)
    second = copy.deepcopy(doc["nodes"][1])
    second["id"] = "shorten"
    second["config"].update(model="gpt-4.1", prompt="Shorten: {{ headline }}", output="short")
    doc["nodes"].insert(2, second)
    doc["edges"] = [{"source": "start", "target": "summarize"},
                    {"source": "summarize", "target": "shorten"},
                    {"source": "shorten", "target": "end"}]  # fmt: skip
    openai_server.queue(OpenAIReply("Disk full on db-1", usage=ow.Usage(31, 6, cached_tokens=4)))
    openai_server.queue(OpenAIReply("db-1 full", usage=ow.Usage(20, 3)))
    agent = ok(api.post(f"{API}/agents", json=doc), 201)["id"]
    run = ok(api.post(f"{API}/agents/{agent}/runs", json={"inputs": ALERT}), 202)
    done = until(api, run["id"], "succeeded", "failed")
    assert done["status"] == "succeeded", done
    assert done["usage"] == {
        **counts(51, 9, cached=4, cost=71.95),
        "by_model": {
            "openai/gpt-4o-mini": counts(31, 6, cached=4, cost=7.95, calls=1),
            "openai/gpt-4.1": counts(20, 3, cost=64, calls=1),
        },
    }
    listed = ok(api.get(f"{API}/runs", params={"agent_id": agent}))["data"]
    assert listed[0]["usage"] == done["usage"]


ASSISTANT = {
    "name": "usage-assistant",
    "description": "Answers, asking a researcher when it must.",
    "mode": "react",
    "input_mode": "chat",
    "agent": {
        "instructions": "Answer briefly.",
        "model_provider": "openai",
        "model": "gpt-4o-mini",
        "roles": [{"name": "researcher", "description": "Looks things up.",
                   "instructions": "Find the answer.", "model": "gpt-4.1-mini"}],
        "max_input_tokens": 200,
        "compaction": {"enabled": True, "trigger_ratio": 0.5, "target_ratio": 0.2,
                       "summary_max_tokens": 128},
    },
}  # fmt: skip


def say(api: TestClient, chat_id: str, text: str) -> dict[str, Any]:
    body = {"content": text}
    run = ok(api.post(f"{API}/conversations/{chat_id}/messages", json=body), 202)
    return until(api, run["id"], "succeeded", "failed")


def test_a_react_turn_counts_its_summary_its_iterations_and_its_delegate(
    api: TestClient, openai_server: OpenAIServer
) -> None:
    agent = ok(api.post(f"{API}/agents", json=ASSISTANT), 201)["id"]
    chat = ok(api.post(f"{API}/agents/{agent}/conversations"), 201)
    long_answer = "The order shipped on Monday and " + "it is on its way to you. " * 40
    openai_server.queue(OpenAIReply(long_answer, usage=ow.Usage(40, 250)))
    first = say(api, chat["id"], "Where is my order?")
    assert first["status"] == "succeeded", first
    assert first["usage"] == {
        **counts(40, 250, cost=156),
        "by_model": {"openai/gpt-4o-mini": counts(40, 250, cost=156, calls=1)},
    }

    # The second turn's history is over the budget: a summary first, then the loop, which
    # asks its researcher (another model) before it answers.
    ask = ow.ToolCall("researcher", {"task": "When does it arrive?"}, id="r1")
    openai_server.queue(OpenAIReply("The user asked where the order is; it shipped Monday.",
                                    usage=ow.Usage(300, 15)))  # fmt: skip
    openai_server.queue(OpenAIReply(tool_calls=[ask], usage=ow.Usage(60, 12, cached_tokens=8)))
    openai_server.queue(OpenAIReply("Thursday.", usage=ow.Usage(25, 30, reasoning_tokens=20)))
    openai_server.queue(OpenAIReply("It arrives on Thursday.", usage=ow.Usage(90, 7)))
    second = say(api, chat["id"], "And when will it arrive?")
    assert second["status"] == "succeeded", second
    events = ok(api.get(f"{API}/runs/{second['id']}/events", params={"limit": 1000}))["data"]
    assert [e["data"]["mode"] for e in events if e["type"] == "compaction.applied"] == [
        "summarized"
    ]
    assert second["usage"] == {
        **counts(475, 64, reasoning=20, cached=8, cost=145.3),
        "by_model": {
            "openai/gpt-4o-mini": counts(450, 34, cached=8, cost=87.3, calls=3),
            "openai/gpt-4.1-mini": counts(25, 30, reasoning=20, cost=58, calls=1),
        },
    }
    assert second["outputs"] == {"answer": "It arrives on Thursday."}
