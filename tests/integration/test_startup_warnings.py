"""What a server says when it starts in a risky configuration."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from dhub.api.app import create_app
from dhub.settings import Settings


def test_an_unsafe_sandbox_is_announced_loudly(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DHUB_SANDBOX", "unsafe")
    with caplog.at_level(logging.WARNING), TestClient(create_app(settings)):
        pass
    [warning] = [r for r in caplog.records if "DHUB_SANDBOX=unsafe" in r.getMessage()]
    assert warning.levelno == logging.WARNING and "WITHOUT isolation" in warning.getMessage()


def test_a_sandboxed_server_says_nothing_of_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("DHUB_SANDBOX", raising=False)
    with caplog.at_level(logging.WARNING), TestClient(create_app(settings)):
        pass
    assert not [r for r in caplog.records if "DHUB_SANDBOX" in r.getMessage()]
