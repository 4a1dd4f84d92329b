"""Contexts for work that belongs to no single run or request (docs/observability.md)."""

from __future__ import annotations

import contextvars

from opentelemetry import context as otel_context

# The OpenTelemetry instrumentations (SQLAlchemy's, httpx's) record nothing while this is set
# (what opentelemetry.instrumentation.utils.suppress_instrumentation sets; private, but the
# one key every instrumentation reads).
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY as _SUPPRESSED


def untraced() -> contextvars.Context:
    """A fresh context for a task shared by many runs (the group committer's): no span is
    current and the instrumentations record nothing in it. Created in the context of the
    run that happened to start it, its statements would be traced as that run's, while they
    write the steps of many; the step-save histogram (``/metrics``) measures them instead."""
    fresh = contextvars.Context()
    quiet = otel_context.set_value(_SUPPRESSED, True, otel_context.Context())
    fresh.run(otel_context.attach, quiet)
    return fresh
