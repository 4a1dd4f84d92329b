"""OpenTelemetry traces of runs (docs/observability.md "Traces").

Tracing is on only when the standard variables ask for an exporter (``OTEL_TRACES_EXPORTER``,
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); ``start`` reads them
at a process's start (the app factory, the worker), never at import. Off, nothing here runs
during a run: the durable executor asks ``run_trace`` and gets None.

On, each execution of a run is a span (``invoke_agent {name}`` for react agents, ``workflow
{name}`` for workflows), with a span per node (from the run's trace events), per model call
(``chat {model}``, GenAI semantic conventions, through ``TracedModel``) and per tool call of a
react loop (``execute_tool {name}``). The request that creates a run is in the trace: its
context (an incoming ``traceparent`` continued by the FastAPI instrumentation) is saved in the
run's ``sys.trace.parent``, so every execution of the run, wherever and whenever it happens,
is a child of it. Each execution saves its own span as ``sys.trace.run``; the next one (after
a restart, a park, on another worker) links to it with a span Link.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from dhub.engine.compile import CompiledGraph
from dhub.observability.traced_model import TracedModel, json_text, usage_attributes
from dhub.runtime.executor import RunResult
from dhub.runtime.ports import ModelPort
from dhub.runtime.run_writer import Parked, Stopped

if TYPE_CHECKING:  # the SDK is imported when tracing starts, not with dhub
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("dhub.traces")

CAPTURE_ENV = "DHUB_OTEL_CAPTURE_CONTENT"
SYS_KEY = "trace"  # the run's sys.trace: {"parent": traceparent, "run": traceparent}
_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass
class _Tracing:
    provider: TracerProvider
    tracer: trace.Tracer
    capture: bool  # prompts, completions and tool arguments recorded on spans
    owned: bool  # made by ``start`` from the environment: shut down by ``stop``


_state: _Tracing | None = None


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard variables ask for traces to be exported."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def start(env: Mapping[str, str] = os.environ) -> bool:
    """Set tracing up from the environment (a process's start); True when it is on. A
    provider installed already (tests, a second app in one process) is kept."""
    if _state is not None:
        return True
    if not wanted(env):
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    capture = _capture(env)
    exporter = _exporter(env)  # both refused before anything is set up
    named = "OTEL_SERVICE_NAME" in env or "service.name" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    resource = Resource.create({} if named else {"service.name": "dhub"})
    from dhub.observability.sampling import WithinWork

    configured = TracerProvider(resource=resource, shutdown_on_exit=False).sampler  # OTEL_*
    provider = TracerProvider(resource=resource, sampler=WithinWork(configured))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider, capture=capture, owned=True)
    log.info("traces are exported (%s)", _where(env))
    return True


def check(env: Mapping[str, str] = os.environ) -> None:
    """Refuse, before a process starts, what ``start`` would refuse (ValueError)."""
    if wanted(env):
        _capture(env)
        _exporter_kind(env)


def _exporter_kind(env: Mapping[str, str]) -> str:
    kind = (env.get("OTEL_TRACES_EXPORTER") or "otlp").strip().lower()
    if kind not in ("otlp", "console"):
        raise ValueError(
            f"OTEL_TRACES_EXPORTER={kind!r} is not one dhub has: use otlp, console or none."
        )
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if kind == "otlp" and protocol != "http/protobuf":
        raise ValueError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: dhub exports OTLP over HTTP only; "
            "set it to http/protobuf (the collector's port 4318) or leave it unset."
        )
    return kind


def _exporter(env: Mapping[str, str]) -> Any:
    if _exporter_kind(env) == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter(out=sys.stderr)  # stdout is for results (`dhub run` prints JSON)


def _where(env: Mapping[str, str]) -> str:
    return (
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_TRACES_EXPORTER", "otlp")
    )


def _capture(env: Mapping[str, str]) -> bool:
    value = env.get(CAPTURE_ENV, "off").strip().lower()
    if value not in ("on", "off"):
        raise ValueError(f"{CAPTURE_ENV} must be on or off, not {value!r}.")
    return value == "on"


def install(provider: TracerProvider, capture: bool = False, owned: bool = False) -> None:
    """Trace with ``provider`` (tests pass one with an in-memory exporter); outgoing httpx
    requests are traced from now on (httpx2 too: the OpenAI SDK's client)."""
    global _state
    _state = _Tracing(provider, provider.get_tracer("dhub"), capture, owned)
    for instrumentor in _http_instrumentors():
        instrumentor.instrument(tracer_provider=provider)


def _http_instrumentors() -> list[Any]:
    from opentelemetry.instrumentation import httpx as instrumentation

    found: list[Any] = [instrumentation.HTTPXClientInstrumentor()]
    if hasattr(instrumentation, "HTTPX2ClientInstrumentor"):  # where httpx2 is installed
        found.append(instrumentation.HTTPX2ClientInstrumentor())
    return found


def uninstall() -> None:
    """Stop tracing (flushing what the provider holds when ``start`` made it)."""
    global _state
    if _state is None:
        return
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    for instrumentor in _http_instrumentors():
        instrumentor.uninstrument()
    if SQLAlchemyInstrumentor().is_instrumented_by_opentelemetry:
        SQLAlchemyInstrumentor().uninstrument()
    if _state.owned:
        _state.provider.shutdown()
    _state = None


def stop() -> None:
    """A process's stop: end what ``start`` set up (not a provider a test installed)."""
    if _state is not None and _state.owned:
        uninstall()


def enabled() -> bool:
    return _state is not None


def instrument_app(app: Any) -> None:
    """Server spans for the API's requests (an incoming ``traceparent`` is their parent)."""
    if _state is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    # No span per ASGI message (an "http send" per response chunk), and none for probes and
    # scrapes unless OTEL_PYTHON_FASTAPI_EXCLUDED_URLS says otherwise.
    listed = any(f"OTEL_PYTHON_{k}EXCLUDED_URLS" in os.environ for k in ("", "FASTAPI_"))
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=_state.provider, exclude_spans=["receive", "send"],
        excluded_urls=None if listed else _UNTRACED_URLS,
    )  # fmt: skip


def instrument_engines(engines: list[Any]) -> None:
    """A span per SQL statement of ``engines`` (SQLAlchemy's, sync or async): a process's
    database. The instrumentor is one per process: a later database (tests, benchmarks)
    takes it over from the earlier one."""
    if _state is None:
        return
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    instrumentor = SQLAlchemyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    syncs = [getattr(engine, "sync_engine", engine) for engine in engines]
    # The package declares SQLAlchemy < 2.1 and would silently do nothing with dhub's 2.1;
    # its event hooks work there (tests/integration/test_traces.py sees the statements).
    instrumentor.instrument(engines=syncs, tracer_provider=_state.provider, skip_dep_check=True)


_UNTRACED_URLS = "/healthz$,/readyz$,/metrics$"


def carried() -> dict[str, Any]:
    """What a run being created keeps of the current trace (the request's span): its
    ``sys.trace``; empty when tracing is off or no span is current."""
    if _state is None or not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return {SYS_KEY: {"parent": carrier["traceparent"]}} if "traceparent" in carrier else {}


def _extract(traceparent: Any) -> otel_context.Context | None:
    if not isinstance(traceparent, str):
        return None
    return _PROPAGATOR.extract({"traceparent": traceparent})


def _traceparent(span: Span) -> str:
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
    return carrier["traceparent"]


# -- a run ------------------------------------------------------------------------------------


def run_trace(graph: CompiledGraph, sys: dict[str, Any], resumed: bool) -> RunTrace | None:
    """The span of one execution of a run (None when tracing is off). ``sys`` is the run's
    sys scope: its ``trace`` (saved at creation, and by the previous execution) gives the
    parent and the link; this execution's span is written into it, saved with the next step."""
    if _state is None:
        return None
    return RunTrace(_state, graph, sys, resumed)


_QUIET_NODES = frozenset(("start", "end", "variable", "if_else", "llm"))
_QUIET_OUTCOMES = frozenset(("node.started", "node.succeeded", "node.skipped"))


class RunTrace:
    """The spans of one execution: the run's, its nodes' and its tool calls'."""

    def __init__(
        self, tracing: _Tracing, graph: CompiledGraph, sys: dict[str, Any], resumed: bool
    ) -> None:
        self.tracer = tracing.tracer
        self.capture = tracing.capture
        self.graph = graph
        saved = _dict(sys.get(SYS_KEY))
        parent = _extract(saved.get("parent"))
        links = []
        if resumed and (earlier := _extract(saved.get("run"))) is not None:
            links = [Link(trace.get_current_span(earlier).get_span_context())]
        spec = graph.spec
        react = spec.mode == "react"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent" if react else "workflow",
            "gen_ai.agent.name": spec.name,
            "dhub.run.id": str(sys.get("run_id", "")),
            "dhub.agent.id": str(sys.get("agent_id", "")),
            "dhub.run.resumed": resumed,
        }
        if isinstance(sys.get("agent_id"), str):
            attributes["gen_ai.agent.id"] = sys["agent_id"]
        if isinstance(sys.get("conversation_id"), str):
            attributes["gen_ai.conversation.id"] = sys["conversation_id"]
        name = f"invoke_agent {spec.name}" if react else f"workflow {spec.name}"
        self.span = self.tracer.start_span(
            name, context=parent if parent is not None else otel_context.Context(),
            links=links, attributes=attributes,
        )  # fmt: skip
        # Sampled out (OTEL_TRACES_SAMPLER): its span stays current, so what runs inside it
        # (model requests) is sampled out too, and nothing else is done for it.
        self.recording = self.span.is_recording()
        if self.recording:
            sys[SYS_KEY] = {**saved, "run": _traceparent(self.span)}
        self._nodes: dict[str, Span] = {}  # node key -> its open span
        self._tools: dict[str, Span] = {}  # node key|delegate|call id -> its open span

    def current(self) -> Any:
        """Make the run's span current for the task executing it (a context manager)."""
        return trace.use_span(
            self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        )

    def observe(self, event: dict[str, Any]) -> None:
        """The executor's observer: the run's trace events open and close spans."""
        if not self.recording:
            return
        kind = event.get("type", "")
        if kind.startswith("node."):
            self._node_event(kind, event)
        elif kind.startswith("tool."):
            self._tool_event(kind, event)

    def _node_event(self, kind: str, event: dict[str, Any]) -> None:
        frame, node_id = str(event.get("frame", "")), str(event.get("node_id", ""))
        key = f"{frame}/{node_id}" if frame else node_id
        if kind in _QUIET_OUTCOMES and self._quiet(node_id):
            return
        if kind == "node.started":
            if (earlier := self._nodes.pop(key, None)) is not None:
                earlier.end()  # a retry starts it anew
            self._nodes[key] = self._open_node(frame, node_id)
        elif kind == "node.skipped":  # never started: a span of no length says so
            self._close(self._open_node(frame, node_id), kind)
        elif kind == "node.succeeded":
            self._close(self._take(frame, node_id), kind)
        elif kind in ("node.failed", "node.retrying"):  # a retry is a span of its own
            span = self._take(frame, node_id)
            error = _dict(event.get("error"))
            span.set_attribute("error.type", str(error.get("type") or error.get("kind", "error")))
            span.set_attribute("dhub.node.outcome", kind.removeprefix("node."))
            span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:500]))
            span.end()

    def _quiet(self, node_id: str) -> bool:
        """Nodes that only move data in the run's state (start, end, variable, if_else) get a
        span only when they fail: a span costs more than such a node (bench/traces.py), and
        the run's events have them all. An ``llm`` node's span is its model call's (``chat``,
        with the node's id and type): a node span around it would say the same twice."""
        return self.node_type(node_id) in _QUIET_NODES

    def node_type(self, node_id: str) -> str:
        return str(getattr(self.graph.nodes.get(node_id), "type", ""))

    def _take(self, frame: str, node_id: str) -> Span:
        """The node's open span, to end: opened now when it started in an earlier execution."""
        self.node_span(frame, node_id)
        return self._nodes.pop(f"{frame}/{node_id}" if frame else node_id)

    @staticmethod
    def _close(span: Span, kind: str) -> None:
        span.set_attribute("dhub.node.outcome", kind.removeprefix("node."))
        span.end()

    def node_span(self, frame: str, node_id: str) -> Span:
        """The open span of a node, opened now when its start was in an earlier execution."""
        key = f"{frame}/{node_id}" if frame else node_id
        span = self._nodes.get(key)
        if span is None:  # a quiet node's span is opened only when it fails
            late = not self._quiet(node_id)
            span = self._nodes[key] = self._open_node(frame, node_id, resumed=late)
        return span

    def _open_node(self, frame: str, node_id: str, resumed: bool = False) -> Span:
        attributes: dict[str, Any] = {"dhub.node.id": node_id,
                                      "dhub.node.type": self.node_type(node_id)}  # fmt: skip
        if frame:
            attributes["dhub.node.frame"] = frame
        if resumed:
            attributes["dhub.node.resumed"] = True
        return self.tracer.start_span(
            f"node {node_id}", context=self.parent_of(frame), attributes=attributes
        )

    def parent_of(self, frame: str) -> otel_context.Context:
        """A node in a loop's iteration or a parallel's branch is a child of that loop's or
        parallel's span (frame ``each#2`` -> node key ``each``); a top-level node, the run's."""
        if frame:
            cut = max(frame.rfind("#"), frame.rfind("@"))
            holder = self._nodes.get(frame[:cut]) if cut > frame.rfind("/") else None
            if holder is not None:
                return trace.set_span_in_context(holder)
        return trace.set_span_in_context(self.span)

    def _tool_event(self, kind: str, event: dict[str, Any]) -> None:
        frame, node_id = str(event.get("frame", "")), str(event.get("node_id", ""))
        call_id, name = str(event.get("call_id", "")), str(event.get("name", ""))
        key = f"{frame}/{node_id}|{event.get('delegate', '')}|{call_id}"
        if kind == "tool.called":
            category = str(event.get("category", ""))
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id, "dhub.tool.category": category,
                "gen_ai.tool.type": "datastore" if category == "knowledge" else "function",
            }  # fmt: skip
            if self.capture:
                attributes["gen_ai.tool.call.arguments"] = json_text(event.get("arguments"))
            parent = trace.set_span_in_context(self.node_span(frame, node_id))
            self._tools[key] = self.tracer.start_span(
                f"execute_tool {name}", context=parent, attributes=attributes
            )
            return
        span = self._tools.pop(key, None)
        if span is None:
            return  # called in an earlier execution: that span ended with it
        if kind == "tool.failed":
            error = _dict(event.get("error"))
            span.set_attribute("error.type", str(error.get("kind", "error")))
            span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:500]))
        elif self.capture:
            span.set_attribute("gen_ai.tool.call.result", json_text(event.get("result")))
        span.end()

    def close(
        self, status: str, error: dict[str, Any] | None = None, usage: dict[str, Any] | None = None
    ) -> None:
        """End the execution's spans: the run ended (``status``), or it leaves this process
        (``parked``, ``stopped``); spans still open (a node waiting) end with it. ``usage``:
        the run's, so far (its tokens and cost go on the run's span)."""
        usage_attributes(self.span, usage or {})
        for span in self._tools.values():
            span.set_attribute("dhub.tool.outcome", "open")  # e.g. waiting for a person's yes
            span.end()
        for span in reversed(self._nodes.values()):
            span.set_attribute("dhub.node.outcome", "open")
            span.end()
        self._tools.clear()
        self._nodes.clear()
        self.span.set_attribute("dhub.run.status", status)
        if status in ("failed", "crashed"):
            error = error or {}
            self.span.set_attribute("error.type", str(error.get("kind", status)))
            self.span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:500]))
        self.span.end()


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# -- the durable executor's hooks -------------------------------------------------------------


def model_port(model: ModelPort, run: RunTrace | None) -> ModelPort:
    return model if run is None else TracedModel(model, run)


def observer(run: RunTrace | None) -> Callable[[dict[str, Any]], None] | None:
    return None if run is None else run.observe


async def traced(run: RunTrace | None, work: Awaitable[RunResult]) -> RunResult:
    """Perform one execution of a run (``work``) inside its span, then end the span with
    how the execution ended: the run's status, or parked, stopped, interrupted, crashed."""
    if run is None:
        return await work
    try:
        with run.current():
            result = await work
    except Parked:
        run.close("parked")
        raise
    except Stopped:
        run.close("stopped")
        raise
    except asyncio.CancelledError:  # cancelled by a person (its step saved), or cut off
        run.close("interrupted")
        raise
    except Exception as exc:
        run.close("crashed", {"kind": type(exc).__name__, "message": str(exc)})
        raise
    run.close(result.status, result.error, result.state.usage)
    return result
