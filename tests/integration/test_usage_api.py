"""Usage and cost (docs/observability.md), on SQLite and PostgreSQL: a run's tokens by model
and its cost from the price table (or the prices file, which wins), kept across a restart;
GET /api/v1/usage summed over the runs the caller may read; a budget that stops a run.

The model is a scripted ``openai`` entry whose replies report known token counts; the agent
is the support fixture (openai/gpt-4o-mini: $0.15 per million input tokens, $0.075 cached,
$0.60 output in the table)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.providers.testing import Reply
from dhub.providers.types import Usage
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.test_llm_runs_api import ALERT, SUMMARIZER
from tests.integration.test_react_runs_api import DONE, LOOKUP, REFUND, SUPPORT, approve, log, say
from tests.integration.test_runs_api import ok, until, user

API = "/api/v1"
MODEL = "openai/gpt-4o-mini"
# (1000 - 400) * 0.15 + 400 * 0.075 + 100 * 0.60 = 180 millionths of a dollar
ASKED = Reply(tool_calls=LOOKUP["tool_calls"], usage=Usage(1000, 100, 20, 400))
# 2000 * 0.15 + 300 * 0.60 = 480 millionths
ANSWERED = Reply(DONE, usage=Usage(2000, 300))
REFUNDING = Reply(tool_calls=REFUND["tool_calls"], usage=Usage(1500, 50))  # 255 millionths


def server(settings: Settings, replies: list[Any], prices_file: Path | None = None) -> TestClient:
    env = {"DHUB_PRICES_FILE": str(prices_file)} if prices_file else {}
    prices = ProvidersConfig.from_env(env).prices
    entry = EntryConfig(type="scripted", replies=replies)
    providers = ProvidersConfig(entries={"openai": entry}, prices=prices)
    client = TestClient(create_app(Settings(**{**vars(settings), "providers": providers})))
    client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
    return client


def agent(client: TestClient, **changes: Any) -> str:
    doc = copy.deepcopy(SUPPORT)
    doc.update(changes)
    return str(ok(client.post(f"{API}/agents", json=doc), 201)["id"])


def finished(client: TestClient, agent_id: str, **headers: str) -> dict[str, Any]:
    chat = ok(client.post(f"{API}/agents/{agent_id}/conversations", headers=headers), 201)
    body = {"content": "Where is order A-1001?"}
    run = ok(client.post(f"{API}/conversations/{chat['id']}/messages", json=body,
                         headers=headers), 202)  # fmt: skip
    return until(client, run["id"], "succeeded", "failed", **headers)


def test_a_runs_usage_has_its_tokens_by_model_and_their_cost(settings: Settings) -> None:
    with server(settings, [ASKED, ANSWERED]) as client:
        run = finished(client, agent(client))
        events = log(client, run["id"])
    assert run["status"] == "succeeded", run["error"]
    usage = run["usage"]
    counts = {k: usage[k] for k in ("input_tokens", "output_tokens", "reasoning_tokens",
                                    "cached_tokens", "total_tokens")}  # fmt: skip
    assert counts == {"input_tokens": 3000, "output_tokens": 400, "reasoning_tokens": 20,
                      "cached_tokens": 400, "total_tokens": 3400}  # fmt: skip
    assert usage["cost_usd"] == pytest.approx(0.00066)
    assert list(usage["by_model"]) == [MODEL]
    per_model = usage["by_model"][MODEL]
    assert per_model["calls"] == 2 and per_model["cost_usd"] == pytest.approx(0.00066)
    costs = [e["data"]["usage"]["cost_usd"] for e in events if e["type"] == "agent.message"]
    assert costs == [pytest.approx(0.00018), pytest.approx(0.00048)]  # each call's, as it came


def test_the_prices_file_wins_and_an_unknown_model_costs_null(
    settings: Settings, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("prices:\n  openai/gpt-4o-mini: {input_mtok: 1, output_mtok: 2}\n")
    with server(settings, [ASKED, ANSWERED, "Hello."], prices) as client:
        priced = finished(client, agent(client))
        house = copy.deepcopy(SUPPORT["agent"])
        house["model"] = "house-model-7"
        unknown = finished(client, agent(client, name="house", agent=house))
    # 3000 input tokens at $1 a million (cached ones too: no cache price given), 400 at $2
    assert priced["usage"]["cost_usd"] == pytest.approx(0.0038)
    assert unknown["status"] == "succeeded", unknown["error"]  # no price is never a failure
    entry = unknown["usage"]["by_model"]["openai/house-model-7"]
    assert entry["cost_usd"] is None and "house-model-7" in entry["cost_note"]
    assert "DHUB_PRICES_FILE" in unknown["usage"]["cost_note"]


def test_a_bad_prices_file_is_refused_naming_the_field(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"prices": {"gpt-4o": {"input_mtok": -1, "output_mtok": 2}}}')
    with pytest.raises(ValueError, match=r"DHUB_PRICES_FILE.*prices\.gpt-4o\.input_mtok"):
        ProvidersConfig.from_env({"DHUB_PRICES_FILE": str(prices)})


def test_usage_counts_every_call_across_a_restart(settings: Settings) -> None:
    with server(settings, [ASKED, REFUNDING]) as client:
        _, run_id = say(client, agent(client), "Please refund order A-1001")
        assert until(client, run_id, "waiting", "failed")["status"] == "waiting"
    with server(settings, [ANSWERED]) as client:  # a new process, the same database
        approve(client, run_id)
        done = until(client, run_id, "succeeded", "failed")
    assert done["usage"]["by_model"][MODEL]["calls"] == 3
    assert done["usage"]["input_tokens"] == 4500
    assert done["usage"]["cost_usd"] == pytest.approx(0.00018 + 0.000255 + 0.00048)


def test_the_usage_endpoint_sums_the_runs_the_caller_may_read(settings: Settings) -> None:
    with server(settings, [ASKED, ANSWERED] * 3) as client:
        support = agent(client)
        alice, bob = user(client, "alice"), user(client, "bob")
        grant = {"principal_id": alice["id"], "scope": "runner"}
        ok(client.post(f"{API}/agents/{support}/grants", json=grant), 201)
        as_alice, as_bob = ({"Authorization": u["Authorization"]} for u in (alice, bob))
        finished(client, support)
        finished(client, support, **as_alice)
        finished(client, support, **as_alice)

        def usage(headers: dict[str, str] | None = None, **params: str) -> Any:
            return client.get(f"{API}/usage", params=params, headers=headers or {})

        everything = ok(usage())
        assert (everything["runs"], everything["calls"]) == (3, 6)
        assert everything["cost_usd"] == pytest.approx(3 * 0.00066)
        assert everything["by_model"][MODEL]["output_tokens"] == 1200
        assert ok(usage(user_id=alice["id"]))["runs"] == 2
        assert ok(usage(as_alice))["runs"] == 2  # without an agent: her own runs
        assert ok(usage(as_alice, agent_id=support))["runs"] == 3  # she reads the agent
        assert ok(usage(as_alice, user_id="user.admin"))["runs"] == 0
        assert ok(usage(as_bob))["runs"] == 0
        hidden, random = usage(as_bob, agent_id=support), usage(as_bob, agent_id="agt_nothing")
        assert hidden.status_code == random.status_code == 404
        assert hidden.json()["detail"].replace(support, "X") == random.json()["detail"].replace(
            "agt_nothing", "X"
        )
        assert ok(usage(**{"from": "2999-01-01T00:00:00Z"}))["runs"] == 0
        assert ok(usage(to="2000-01-01T00:00:00Z"))["runs"] == 0
        assert ok(usage(**{"from": "2000-01-01", "to": "2999-01-01"}))["runs"] == 3
        bad = usage(**{"from": "yesterday", "to": "2000-01-01"})
        assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "/query/from"
        backwards = usage(**{"from": "2030-01-01", "to": "2020-01-01"})
        assert backwards.status_code == 422
        assert [e["loc"] for e in backwards.json()["errors"]] == ["/query/from", "/query/to"]


def test_a_budget_stops_the_run_after_the_call_that_went_over(settings: Settings) -> None:
    with server(settings, [ASKED, ANSWERED]) as client:
        bad = copy.deepcopy(SUPPORT)
        bad["options"] = {"max_cost_usd": "lots"}
        refused = client.post(f"{API}/agents", json=bad)
        assert refused.status_code == 422
        assert [e["loc"] for e in refused.json()["errors"]] == ["/options/max_cost_usd"]
        run = finished(client, agent(client, options={"max_cost_usd": 0.0001}))
        events = log(client, run["id"])
    assert run["status"] == "failed"
    assert run["error"]["kind"] == "budget" and "max_cost_usd" in run["error"]["message"]
    assert run["error"]["cost_usd"] == pytest.approx(0.00018)
    assert run["usage"]["cost_usd"] == pytest.approx(0.00018)  # the call that went over counts
    types = [e["type"] for e in events]
    assert types.count("agent.message") == 1 and "tool.succeeded" not in types
    assert types[-1] == "run.failed"


def test_a_budget_stops_a_workflow_before_its_next_model_call(settings: Settings) -> None:
    doc = copy.deepcopy(SUMMARIZER)
    second = copy.deepcopy(doc["nodes"][1])
    second["id"] = "shorten"
    second["config"].update(prompt="Shorten: {{ headline }}", output="short")
    doc["nodes"].insert(2, second)
    doc["edges"] = [{"source": "start", "target": "summarize"},
                    {"source": "summarize", "target": "shorten"},
                    {"source": "shorten", "target": "end"}]  # fmt: skip
    doc["options"] = {"max_cost_usd": 0.0002}
    # 1000 x $0.15 + 100 x $0.60 a million: 210 millionths, over the budget of 200
    replies = [Reply("Disk full on db-1", usage=Usage(1000, 100)), "never asked"]
    with server(settings, replies) as client:
        agent_id = ok(client.post(f"{API}/agents", json=doc), 201)["id"]
        run = ok(client.post(f"{API}/agents/{agent_id}/runs", json={"inputs": ALERT}), 202)
        done = until(client, run["id"], "succeeded", "failed")
        events = log(client, run["id"])
    assert done["status"] == "failed" and done["error"]["kind"] == "budget", done["error"]
    assert done["usage"]["cost_usd"] == pytest.approx(0.00021)
    started = [e["node_id"] for e in events if e["type"] == "node.started"]
    assert started == ["start", "summarize"]  # "shorten" never asked its model


def test_the_sdk_and_the_cli_show_the_same_totals(settings: Settings) -> None:
    from typer.testing import CliRunner

    from dhub.cli.main import app
    from dhub.client import Client

    with server(settings, [ASKED, ANSWERED]) as client:
        agent_id = agent(client)
        run = finished(client, agent_id)
        api = Client(str(client.base_url), ADMIN_TOKEN, http=client)
        hour_ago = datetime.now(UTC) - timedelta(hours=1)
        by_name = api.usage(SUPPORT["name"], since=hour_ago)
        later = api.usage(agent_id, since="2999-01-01T00:00:00Z")
        shown = CliRunner().invoke(app, ["usage", "--agent", SUPPORT["name"]], obj=api)
        as_json = CliRunner().invoke(app, ["usage", "--agent", agent_id, "--json"], obj=api)
        bad = CliRunner().invoke(app, ["usage", "--from", "yesterday"], obj=api)
    assert (
        run["status"] == "succeeded"
        and by_name["runs"] == 1
        and by_name["cost_usd"] == pytest.approx(0.00066)
    )
    assert later["runs"] == 0
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[0] == "1 runs, 2 model calls, 3400 tokens, cost $0.00066"
    assert MODEL in shown.stdout and "3000" in shown.stdout
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == by_name
    assert bad.exit_code == 1 and "from" in bad.stderr
