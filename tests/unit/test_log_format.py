"""DHUB_LOG_FORMAT=json (docs/observability.md "Logs"): one JSON object per line, with the run,
node, trace and span a line was written in when they are known."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from dhub.observability import logs


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("dhub.test.json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, out
    logger.removeHandler(handler)


def lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_outside_a_run_has_only_the_basics(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = captured
    logger.info("started on %s", "port 8000")
    [line] = lines(out)
    assert set(line) == {"time", "level", "logger", "message"}
    assert line["level"] == "INFO" and line["logger"] == "dhub.test.json"
    assert line["message"] == "started on port 8000"
    assert str(line["time"]).endswith("+00:00")


def test_a_line_in_a_run_names_its_run_node_trace_and_span(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = captured
    tracer = TracerProvider().get_tracer("test")
    run, node = logs.run_id.set("run.1"), logs.node_id.set("lookup")
    try:
        with tracer.start_as_current_span("work") as span:
            logger.warning('quote " and newline\n kept in one line')
    finally:
        logs.node_id.reset(node)
        logs.run_id.reset(run)
    [line] = lines(out)  # one physical line per record, whatever the message holds
    assert line["run_id"] == "run.1" and line["node_id"] == "lookup"
    context = span.get_span_context()
    assert line["trace_id"] == format(context.trace_id, "032x")
    assert line["span_id"] == format(context.span_id, "016x")
    assert line["message"] == 'quote " and newline\n kept in one line'


def test_an_exception_keeps_its_traceback(captured: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = captured
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("it failed")
    [line] = lines(out)
    assert line["level"] == "ERROR" and "ValueError: boom" in str(line["exc_info"])


def test_the_format_is_named_or_refused() -> None:
    assert logs.log_format({}) == "text"
    assert logs.log_format({"DHUB_LOG_FORMAT": "JSON"}) == "json"
    with pytest.raises(ValueError, match="DHUB_LOG_FORMAT must be text or json"):
        logs.log_format({"DHUB_LOG_FORMAT": "xml"})
