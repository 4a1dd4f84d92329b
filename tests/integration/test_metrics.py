"""GET /metrics (docs/observability.md, "Metrics"), read with Prometheus's own parser: known
runs move the counters and histograms by exactly what they did (SQLite and PostgreSQL), the
DHUB_METRICS setting guards the endpoint, and several processes sharing
PROMETHEUS_MULTIPROC_DIR are read as one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from dhub.api.app import create_app
from dhub.services.runtime import WorkerOptions
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, ROOT, _truncate, pg_url
from tests.integration.test_react_runs_api import DONE, LOOKUP, REFUND, SUPPORT, approve, say
from tests.integration.test_react_runs_api import server as react_server
from tests.integration.test_runs_api import BATCH, TRIAGE, create, ok, until, user

API = "/api/v1"
Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]


def scrape(client: TestClient, **headers: str) -> Samples:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


def parse(exposition: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples that have ``labels`` (0 when there is none)."""
    wanted = set(labels.items())
    return sum(v for (n, got), v in samples.items() if n == name and wanted <= set(got))


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def on(settings: Settings, **changes: Any) -> Settings:
    return Settings(**{**vars(settings), "metrics": "on", **changes})


def test_workflow_runs_move_the_counters_by_what_they_did(settings: Settings) -> None:
    with TestClient(create_app(on(settings))) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        triage, batch = create(client, TRIAGE), create(client, BATCH)
        before = scrape(client)
        routine = {"inputs": {"ticket": "Checkout page shows an error"}}
        urgent = {"inputs": {"ticket": "Total outage since 9am", "customer": "acme"}}
        runs = [ok(client.post(f"{API}/agents/{triage}/runs", json=body), 202)
                for body in (routine, urgent)]  # fmt: skip
        runs.append(ok(client.post(f"{API}/agents/{batch}/runs",
                                   json={"inputs": {"numbers": [1, 2, 3]}}), 202))  # fmt: skip
        assert until(client, runs[0]["id"], "succeeded")["status"] == "succeeded"
        assert until(client, runs[1]["id"], "waiting")["status"] == "waiting"
        assert until(client, runs[2]["id"], "succeeded")["status"] == "succeeded"
        assert client.get("/no/such/path").status_code == 404
        after = scrape(client)
        ok(client.post(f"{API}/runs/{runs[1]['id']}/cancel"))
        cancelled = scrape(client)

    started, finished = "dhub_runs_started_total", "dhub_runs_finished_total"
    assert moved(before, after, started, agent=triage) == 2
    assert moved(before, after, started, agent=batch) == 1
    assert moved(before, after, finished, agent=triage, status="succeeded") == 1
    assert moved(before, after, finished, agent=batch, status="succeeded") == 1
    assert moved(before, after, finished) == 2  # nothing failed, the waiting run did not end
    durations = "dhub_run_duration_seconds_count"
    assert moved(before, after, durations, agent=triage) == 1
    assert moved(before, after, durations, agent=batch) == 1
    assert moved(before, after, "dhub_run_duration_seconds_sum") > 0
    # Every saved step is timed: three runs took more than one each.
    assert moved(before, after, "dhub_run_step_duration_seconds_count") > 3
    unfinished = "dhub_runs_unfinished"  # read from the database at each scrape
    assert value(after, unfinished, status="waiting") == 1
    assert value(after, unfinished, status="running") == 0
    assert value(after, unfinished, status="queued") == 0
    # Triage: classify once a run. The batch: square 3 times, sum_squares once, flaky 3
    # times (once, retried twice). A function's first call starts its interpreter; later ones
    # do too when the warm replacement is not ready yet.
    calls = "dhub_sandbox_call_duration_seconds_count"
    assert moved(before, after, calls, outcome="ok") == 2 + 4
    assert moved(before, after, calls, outcome="exception") == 3
    assert moved(before, after, calls) == 9
    assert 4 <= moved(before, after, "dhub_sandbox_cold_starts_total") <= 9
    assert value(after, "dhub_sandbox_pool_busy_workers") == 0
    assert value(after, "dhub_sandbox_pool_idle_workers") >= 0
    requests = "dhub_http_requests_total"
    start = f"{API}/agents/{{agent_id}}/runs"
    assert moved(before, after, requests, method="POST", route=start, status="202") == 3
    assert moved(before, after, "dhub_http_request_duration_seconds_count", route=start) == 3
    assert moved(before, after, requests, route="unmatched", status="404") == 1
    assert not [key for key in after if key[0] == requests and "/runs/run." in str(key[1])]
    # The waiting run, cancelled through the API, ends once.
    assert moved(after, cancelled, finished, agent=triage, status="cancelled") == 1
    assert moved(after, cancelled, finished) == 1
    assert value(cancelled, unfinished, status="waiting") == 0


def test_model_calls_count_tokens_and_errors_by_provider_and_model(settings: Settings) -> None:
    with react_server(on(settings), [LOOKUP, REFUND, DONE]) as client:
        agent = ok(client.post(f"{API}/agents", json=SUPPORT), 201)["id"]
        before = scrape(client)
        _, run_id = say(client, agent, "Please refund order A-1001")
        until(client, run_id, "waiting")
        approve(client, run_id)
        done = until(client, run_id, "succeeded", "failed")
        assert done["status"] == "succeeded", done
        answered = scrape(client)
        _, failing = say(client, agent, "And order A-1002?")  # the script has no reply left
        assert until(client, failing, "failed", "succeeded")["status"] == "failed"
        after = scrape(client)

    model = {"provider": "openai", "model": SUPPORT["agent"]["model"]}
    usage = done["usage"]
    assert moved(before, answered, "dhub_model_calls_total", **model) == 3
    assert moved(before, answered, "dhub_model_calls_total") == 3
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    tokens = "dhub_model_tokens_total"
    assert moved(before, answered, tokens, kind="input", **model) == usage["input_tokens"]
    assert moved(before, answered, tokens, kind="output", **model) == usage["output_tokens"]
    assert usage["cost_usd"] > 0  # priced from the table
    cost = moved(before, answered, "dhub_model_cost_usd_total", **model)
    assert cost == pytest.approx(usage["cost_usd"])
    assert moved(before, answered, "dhub_model_errors_total") == 0
    errors = "dhub_model_errors_total"
    assert moved(answered, after, errors, kind="provider_error", **model) == 1
    assert moved(answered, after, "dhub_model_calls_total") == 0
    assert moved(before, after, "dhub_model_call_duration_seconds_count", **model) == 4
    finished = "dhub_runs_finished_total"
    assert moved(before, after, finished, agent=agent, status="succeeded") == 1
    assert moved(before, after, finished, agent=agent, status="failed") == 1
    assert moved(before, after, "dhub_run_duration_seconds_count", agent=agent) == 2


def test_the_setting_guards_the_endpoint(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:  # off: the default
        missing = client.get("/no/such/path")
        off = client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert (
            (off.status_code, off.json())
            == (missing.status_code, missing.json())
            == (
                404,
                {"detail": "Not Found", "errors": []},
            )
        )
        assert "/metrics" not in client.get("/openapi.json").json()["paths"]
    dedicated = "metrics-scraper-0123456789"
    with TestClient(create_app(on(settings, metrics="token", metrics_token=dedicated))) as client:
        assert client.get("/metrics").status_code == 401
        bad = client.get("/metrics", headers={"Authorization": "Bearer not-a-token"})
        assert bad.status_code == 401
        assert "DHUB_METRICS_TOKEN" in bad.json()["detail"]
        client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        someone = user(client, "sam")
        del client.headers["Authorization"]
        refused = client.get("/metrics", headers={"Authorization": someone["Authorization"]})
        assert refused.status_code == 403
        assert "dhub_runs_unfinished" in str(scrape(client, Authorization=f"Bearer {dedicated}"))
        assert scrape(client, Authorization=f"Bearer {ADMIN_TOKEN}")
    with TestClient(create_app(on(settings, metrics="token"))) as client:  # admins only
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer x"}).status_code == 401
        assert scrape(client, Authorization=f"Bearer {ADMIN_TOKEN}")
    with TestClient(create_app(on(settings))) as client:  # on: whoever reaches the port
        assert scrape(client)


@pytest.mark.postgres
def test_the_queue_of_distributed_mode_shows_its_depth_and_lag(
    tmp_path: Path, pg_schema: str
) -> None:
    _truncate(pg_schema)
    settings = Settings(
        data_dir=tmp_path / "data", database_url=pg_url(pg_schema), admin_token=ADMIN_TOKEN,
        execution="distributed", metrics="on",
    )  # fmt: skip
    routine = {"inputs": {"ticket": "Checkout page shows an error"}}
    with TestClient(create_app(settings)) as api:  # no worker: the jobs wait
        api.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        triage = create(api, TRIAGE)
        idle = scrape(api)
        runs = [ok(api.post(f"{API}/agents/{triage}/runs", json=routine), 202) for _ in "ab"]
        time.sleep(0.3)
        waiting = scrape(api)
    with TestClient(create_app(settings, WorkerOptions(4))) as both:
        both.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        for run in runs:
            assert until(both, run["id"], "succeeded", "failed")["status"] == "succeeded"
        done = scrape(both)

    jobs, lag = "dhub_queue_jobs", "dhub_queue_lag_seconds"
    assert [value(idle, jobs, queue="runs", state=s) for s in ("due", "scheduled", "doing")] == [
        0, 0, 0,
    ]  # fmt: skip
    assert value(idle, lag, queue="runs") == 0
    assert value(waiting, jobs, queue="runs", state="due") == 2
    assert value(waiting, "dhub_runs_unfinished", status="queued") == 2
    assert 0.3 <= value(waiting, lag, queue="runs") < 60
    assert value(done, jobs, queue="runs") == 0 and value(done, lag, queue="runs") == 0
    assert moved(waiting, done, "dhub_runs_started_total", agent=triage) == 2
    assert moved(waiting, done, "dhub_runs_finished_total", agent=triage, status="succeeded") == 2


WRITER = """
import sys
from dhub.observability import metrics

metrics.configure("on")
runs, tokens, ended = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "ended"
for _ in range(runs):
    metrics.step_saved("agent.x", 0.01, first=True, ended="succeeded", created_at=None)
metrics.model_answered("openai", "m", {"input_tokens": tokens, "output_tokens": 1}, 0.5)
metrics.sandbox_idle(1)
if ended:
    metrics.process_ended()  # its live gauges go with it
"""

READER = """
import sys
from pathlib import Path
import pytest
from fastapi.testclient import TestClient
from dhub.api.app import create_app
from dhub.services.runtime import WorkerOptions
from dhub.settings import Settings

data = Path(sys.argv[1])
settings = Settings(data_dir=data, database_url=f"sqlite:///{data / 'dhub.db'}",
                    admin_token="dhub_test_admin_token", metrics="on")
with TestClient(create_app(settings)) as client:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    sys.stdout.write(response.text)
"""


def test_processes_sharing_a_multiprocess_directory_are_read_as_one(tmp_path: Path) -> None:
    shared = tmp_path / "prometheus"
    shared.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(shared),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}  # fmt: skip

    def python(script: str, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script), *args],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    python(WRITER, "2", "10", "ended")
    python(WRITER, "3", "5", "alive")
    samples = parse(python(READER, str(tmp_path / "data")))
    assert value(samples, "dhub_runs_started_total", agent="agent.x") == 5
    assert value(samples, "dhub_runs_finished_total", agent="agent.x", status="succeeded") == 5
    assert value(samples, "dhub_run_step_duration_seconds_count") == 5
    assert value(samples, "dhub_model_tokens_total", provider="openai", kind="input") == 15
    assert value(samples, "dhub_model_calls_total", provider="openai", model="m") == 2
    assert value(samples, "dhub_sandbox_pool_idle_workers") == 1  # the first one ended
    assert value(samples, "dhub_runs_unfinished", status="waiting") == 0  # the reader's database
