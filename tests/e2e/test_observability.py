"""The observability issue's "done when", as an operator meets it: `dhub serve` started with
nothing but the standard OpenTelemetry variables and `DHUB_METRICS=on`, a chat with the support
example whose model (a local server speaking OpenAI's wire protocol) calls a tool, then what a
collector receives (OTLP/HTTP protobuf, decoded with the official proto package) and what
Prometheus scrapes (parsed with prometheus-client's parser): the run, its model calls and its
tool call, with tokens and cost, and no dhub code read."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_serve import Server
from tests.support.wire import OpenAIReply, ToolCall
from tests.support.wire.openai_wire import OpenAIServer, Usage

TOKEN = "dhub_observability_token"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


class Collector(BaseHTTPRequestHandler):
    """What an OpenTelemetry collector's OTLP/HTTP receiver takes: /v1/traces, protobuf."""

    spans: ClassVar[list[dict[str, Any]]] = []
    paths: ClassVar[set[str]] = set()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Collector.paths.add(self.path)
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                for span in scope.spans:
                    Collector.spans.append({
                        "name": span.name, "service": service.get("service.name"),
                        "trace": span.trace_id.hex(), "id": span.span_id.hex(),
                        "parent": span.parent_span_id.hex(),
                        "attributes": {a.key: _value(a.value) for a in span.attributes},
                    })  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


@pytest.fixture
def collector() -> Iterator[str]:
    Collector.spans, Collector.paths = [], set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_operator_sees_runs_model_calls_and_tool_calls_with_tokens_and_cost(
    collector: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    lookup = ToolCall("lookup_order", {"order_id": "A-1001"}, id="call_1")
    openai_server.queue(OpenAIReply(tool_calls=[lookup], usage=Usage(1200, 30)))
    openai_server.queue(OpenAIReply("It shipped yesterday.", usage=Usage(1500, 12)))
    server = Server(
        tmp_path / "data",
        DHUB_ADMIN_TOKEN=TOKEN, DHUB_METRICS="on",
        DHUB_OPENAI_API_KEY=str(openai_server.api_key), DHUB_OPENAI_BASE_URL=openai_server.base_url,
        OTEL_EXPORTER_OTLP_ENDPOINT=collector, OTEL_SERVICE_NAME="dhub-prod",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )  # fmt: skip
    try:
        run = _chat(server.url, "support-assistant", "Where is order A-1001?")
        scraped = httpx.get(f"{server.url}/metrics", timeout=10).text
        deadline = time.monotonic() + 30
        while not _named("invoke_agent support-assistant") and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        server.stop()
    assert run["status"] == "succeeded", run
    cost = run["usage"]["cost_usd"]
    assert cost > 0  # gpt-4o-mini is in the price table
    # The collector: one trace, the run's span over its model and tool calls.
    assert Collector.paths == {"/v1/traces"}
    [top] = _named("invoke_agent support-assistant")
    assert top["service"] == "dhub-prod" and top["attributes"]["dhub.run.id"] == run["id"]
    assert top["attributes"]["dhub.run.status"] == "succeeded"
    assert top["attributes"]["gen_ai.usage.input_tokens"] == 2700
    assert top["attributes"]["dhub.cost_usd"] == pytest.approx(cost)
    calls = _named("chat gpt-4o-mini")
    assert [c["attributes"]["gen_ai.usage.output_tokens"] for c in calls] == [30, 12]
    assert sum(c["attributes"]["dhub.cost_usd"] for c in calls) == pytest.approx(cost)
    assert [c["attributes"]["gen_ai.response.finish_reasons"] for c in calls] == [
        ["tool_calls"], ["stop"]]  # fmt: skip
    [tool] = _named("execute_tool lookup_order")
    assert tool["attributes"]["gen_ai.tool.call.id"] == "call_1"
    in_trace = {s["id"]: s for s in Collector.spans if s["trace"] == top["trace"]}
    assert {c["id"] for c in calls} | {tool["id"]} <= set(in_trace)
    assert all(_under(in_trace, s, top["id"]) for s in (*calls, tool))
    # The provider's HTTP request is under its model call (httpx instrumented).
    assert any(s["parent"] == calls[0]["id"] and s["name"].startswith("POST") for s in
               in_trace.values())  # fmt: skip
    # Nothing else: no span per statement of background work (each its own trace), none per
    # ASGI message, none for probes and scrapes.
    names = {s["name"] for s in Collector.spans}
    assert not {n for n in names if n.endswith((" http send", " http receive"))}
    assert not {n for n in names if n.startswith(("GET /healthz", "GET /metrics"))}
    lone = [s for s in Collector.spans if not s["parent"]]
    assert {s["name"].split(" ")[0] for s in lone} <= {"GET", "POST"}, lone  # requests only
    # Prometheus: the same run, calls, tokens and cost.
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(scraped)
               for s in family.samples}  # fmt: skip
    model = (("model", "gpt-4o-mini"), ("provider", "openai"))
    assert samples[("dhub_model_calls_total", model)] == 2
    assert samples[("dhub_model_tokens_total", (("kind", "input"), *model))] == 2700
    assert samples[("dhub_model_cost_usd_total", model)] == pytest.approx(cost)
    finished = [v for (name, labels), v in samples.items() if name == "dhub_runs_finished_total"
                and ("status", "succeeded") in labels]  # fmt: skip
    assert finished == [1]


def _chat(url: str, agent_name: str, text: str) -> dict[str, Any]:
    with httpx.Client(base_url=f"{url}/api/v1", headers=HEADERS, timeout=30) as api:
        [agent] = api.get("/agents", params={"name": agent_name}).json()["data"]
        chat = api.post(f"/agents/{agent['id']}/conversations").json()
        run = api.post(f"/conversations/{chat['id']}/messages", json={"content": text}).json()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found: dict[str, Any] = api.get(f"/runs/{run['id']}").json()
            if found["status"] in ("succeeded", "failed", "cancelled", "waiting"):
                return found
            time.sleep(0.1)
    raise AssertionError(f"run {run['id']} did not finish")


def _named(name: str) -> list[dict[str, Any]]:
    return [s for s in Collector.spans if s["name"] == name]


def _under(spans: dict[str, dict[str, Any]], span: dict[str, Any], ancestor: str) -> bool:
    while span["parent"] in spans:
        if span["parent"] == ancestor:
            return True
        span = spans[span["parent"]]
    return False
