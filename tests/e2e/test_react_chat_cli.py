"""Issue 8's "done when", as a person does it: `dhub chat` with the support example in one
process, asked to confirm the refund; `dhub tasks list` and `dhub tasks approve` from another;
the chat goes on, and every step is in the run's event log. The server runs in this process
(uvicorn on a socket) with a scripted model answering as the support assistant would."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dhub.api.app import create_app
from dhub.client import Client
from dhub.providers.config import EntryConfig, ProvidersConfig
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN, FIXTURES, load_json
from tests.e2e.test_serve import DHUB
from tests.support.served import serving

SUPPORT = load_json(FIXTURES / "valid" / "react_support.json")
REPLIES: list[Any] = [
    {"tool_calls": [{"id": "l1", "name": "lookup_order", "arguments": {"order_id": "A-1001"}}]},
    {"tool_calls": [{"id": "r1", "name": "issue_refund",
                     "arguments": {"order_id": "A-1001", "amount": 42.0}}]},
    "Done: 42.0 is refunded to you.",
]  # fmt: skip


@pytest.fixture
def served(settings: Settings) -> Iterator[str]:
    entry = EntryConfig(type="scripted", replies=REPLIES)
    configured = Settings(**{**vars(settings),
                             "providers": ProvidersConfig(entries={"openai": entry})})  # fmt: skip
    with serving(create_app(configured)) as url:
        yield url


def dhub(url: str, *args: str) -> list[str]:
    return [str(DHUB), "--url", url, "--token", ADMIN_TOKEN, *args]


def test_chat_asks_for_the_refund_and_goes_on_once_another_terminal_approves(
    served: str,
) -> None:
    with Client(served, ADMIN_TOKEN) as sdk:
        sdk.create_agent(SUPPORT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}
    chat = subprocess.Popen(
        dhub(served, "chat", "support-assistant"), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    said: dict[str, str] = {}

    def talk() -> None:  # the chat's terminal: one message, then the end of input
        said["out"], said["err"] = chat.communicate("Please refund order A-1001\n", timeout=60)

    talking = threading.Thread(target=talk)
    talking.start()
    # The other terminal: the refund waits in `dhub tasks list`; approve it.
    listed: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while not listed and time.monotonic() < deadline:
        shown = subprocess.run(dhub(served, "tasks", "list", "--json"), capture_output=True,
                               text=True, env=env, check=True)  # fmt: skip
        listed = json.loads(shown.stdout)
        time.sleep(0.1)
    [task] = listed
    assert task["request"]["actor"] == "issue_refund"
    assert task["request"]["arguments"] == {"order_id": "A-1001", "amount": 42.0}
    approved = subprocess.run(
        dhub(served, "tasks", "approve", task["run_id"], task["command_id"]),
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert approved.stdout.strip() == f"approved {task['command_id']} of {task['run_id']}"
    talking.join(60)
    out, err = said["out"], said["err"]
    assert chat.returncode == 0, err
    assert out == "you> Please refund order A-1001\nDone: 42.0 is refunded to you.\n"
    assert f"Run {task['run_id']} waits for confirmation" in err
    # Every step is in the run's event log.
    with Client(served, ADMIN_TOKEN) as sdk:
        kinds = [e.type for e in sdk.run_events(task["run_id"])]
    for kind in ("run.started", "agent.message", "tool.called", "tool.succeeded",
                 "node.waiting", "confirmation.received", "run.succeeded"):  # fmt: skip
        assert kind in kinds, kinds
