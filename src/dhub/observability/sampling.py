"""The sampler dhub exports with (docs/observability.md "Traces"); imported when tracing
starts, with the SDK."""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import SpanKind


class WithinWork(Sampler):
    """The sampler a process exports with: ``inner`` (OTEL_TRACES_SAMPLER's) decides, except
    that a client span with no parent (a SQL statement or an outgoing request of no request
    and no run: start-up's migrations, the scheduler's polls, sweeps) is left out, so that
    background work does not make a trace per statement every few seconds."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner

    def should_sample(
        self,
        parent_context: otel_context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        alone = not trace.get_current_span(parent_context).get_span_context().is_valid
        if kind is SpanKind.CLIENT and alone:
            return SamplingResult(Decision.DROP)
        return self.inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"WithinWork({self.inner.get_description()})"
