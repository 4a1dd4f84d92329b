"""Tracing is configured by the standard OTEL_* variables only (docs/observability.md): on when
they name an exporter or an endpoint, off (nothing set up) otherwise."""

from __future__ import annotations

import pytest

from dhub.observability import traces


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "dhub"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ],
)
def test_tracing_is_on_only_when_an_exporter_is_asked_for(env: dict[str, str], on: bool) -> None:
    assert traces.wanted(env) is on


def test_off_sets_nothing_up() -> None:
    assert traces.start({}) is False
    assert not traces.enabled() and traces.carried() == {}


def test_what_dhub_cannot_export_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="OTEL_TRACES_EXPORTER='zipkin'"):
        traces.start({"OTEL_TRACES_EXPORTER": "zipkin"})
    grpc = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(ValueError, match="OTLP over HTTP only"):
        traces.start(grpc)
    capture = {"OTEL_TRACES_EXPORTER": "console", "DHUB_OTEL_CAPTURE_CONTENT": "yes"}
    with pytest.raises(ValueError, match="DHUB_OTEL_CAPTURE_CONTENT must be on or off"):
        traces.start(capture)
    with pytest.raises(ValueError, match="DHUB_OTEL_CAPTURE_CONTENT must be on or off"):
        traces.check(capture)  # what the CLI asks before it starts a server or a worker
    assert not traces.enabled()
    traces.check({"DHUB_OTEL_CAPTURE_CONTENT": "yes"})  # tracing off: nothing to refuse
