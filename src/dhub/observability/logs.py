"""Log lines (docs/observability.md "Logs"): plain text by default, one JSON object per line
with ``DHUB_LOG_FORMAT=json``, each with the run, node, trace and span it was written in when
known. The run and node come from context variables the runtime sets in a run's task and in
each call's task (asyncio copies them into the tasks it starts); the trace and span from
OpenTelemetry's current span."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime

from opentelemetry import trace

FORMAT_ENV = "DHUB_LOG_FORMAT"
TEXT_FORMAT = "%(levelname)-9s %(name)s: %(message)s"

run_id: ContextVar[str | None] = ContextVar("dhub_run_id", default=None)
node_id: ContextVar[str | None] = ContextVar("dhub_node_id", default=None)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, message; run_id,
    node_id, trace_id and span_id when known; the exception's traceback as ``exc_info``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if (run := run_id.get()) is not None:
            line["run_id"] = run
        if (node := node_id.get()) is not None:
            line["node_id"] = node
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            line["trace_id"] = format(span.trace_id, "032x")
            line["span_id"] = format(span.span_id, "016x")
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def log_format(env: Mapping[str, str] = os.environ) -> str:
    value = env.get(FORMAT_ENV, "text").strip().lower() or "text"
    if value not in ("text", "json"):
        raise ValueError(f"{FORMAT_ENV} must be text or json, not {value!r}.")
    return value


def configure(env: Mapping[str, str] = os.environ) -> str:
    """Set the root logger up for a server or worker process (INFO); the format chosen. With
    json, uvicorn's own loggers write through the root's handler too."""
    chosen = log_format(env)
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if chosen == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    if chosen == "json":
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logger = logging.getLogger(name)
            logger.handlers.clear()
            logger.propagate = True
    return chosen
