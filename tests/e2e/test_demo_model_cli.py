"""No provider key, as a new user starts: `dhub serve --examples` (the demo model on by
default), then the support example through `dhub chat` in one process, piped, and `dhub tasks
list` / `dhub tasks approve` from another. The demo model looks the order up, asks to refund
it, and answers once the refund is approved; the reply is labelled as the demo model's, saying
how to configure a real one. The summarizer example runs too, its headline marked demo."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dhub.client import Client
from tests.e2e.test_serve import DHUB, Server

TOKEN = "dhub_demo_cli_token"
LABEL = "[demo model: not a real LLM; for real answers, set DHUB_OPENAI_API_KEY on the server]"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("demo") / "data", DHUB_ADMIN_TOKEN=TOKEN)
    try:
        yield server
    finally:
        server.stop()


def dhub(server: Server, *args: str) -> list[str]:
    return [str(DHUB), "--url", server.url, "--token", TOKEN, *args]


ENV = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}


def test_the_support_example_refunds_after_approval_with_no_key(served: Server) -> None:
    chat = subprocess.Popen(
        dhub(served, "chat", "support-assistant"), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    said: dict[str, str] = {}

    def talk() -> None:
        said["out"], said["err"] = chat.communicate("Please refund order A-1001\n", timeout=90)

    talking = threading.Thread(target=talk)
    talking.start()
    listed: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while not listed and time.monotonic() < deadline:
        shown = subprocess.run(dhub(served, "tasks", "list", "--json"), capture_output=True,
                               text=True, env=ENV, check=True)  # fmt: skip
        listed = json.loads(shown.stdout)
        time.sleep(0.1)
    [task] = listed
    assert task["request"]["actor"] == "issue_refund"
    assert task["request"]["arguments"] == {"order_id": "A-1001", "amount": 42.0}
    subprocess.run(dhub(served, "tasks", "approve", task["run_id"], task["command_id"]),
                   capture_output=True, text=True, env=ENV, check=True)  # fmt: skip
    talking.join(90)
    assert chat.returncode == 0, said["err"]
    assert said["out"] == (
        f"you> Please refund order A-1001\n{LABEL}\nDone: order A-1001 is refunded (42.0).\n"
    )
    assert f"Run {task['run_id']} waits for confirmation" in said["err"]


def test_the_summarizer_example_runs_on_the_demo_model(served: Server) -> None:
    with Client(served.url, TOKEN) as sdk:
        found = sdk.find_agent_by_name("incident-summarizer")
    assert found is not None
    started = subprocess.run(
        dhub(served, "runs", "start", found["id"], "--input",
             'alert={"host": "db-1", "disk": 97}', "--wait"),
        capture_output=True, text=True, env=ENV,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert "Disk at 97% on db-1" in started.stdout
    assert "the demo model answers" in Path(served.log).read_text()


def run_cli(server: Server, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(dhub(server, *args), input=stdin, capture_output=True, text=True,
                          env=ENV, timeout=120)  # fmt: skip
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_a_new_user_works_with_knowledge_on_the_demo_model(served: Server, tmp_path: Path) -> None:
    """Issue 19's "done when": import a spreadsheet and ask an agent about it in chat (the
    numbers are the rows'), fill the report template from the workflow and download it, and
    explore the support ontology through the support assistant."""
    sheet = tmp_path / "q4.csv"
    sheet.write_text("region,units,price\nnorth,5,2.5\nsouth,7,1.0\nnorth,4,3.0\neast,1,9.0\n")
    assert "q4" in run_cli(served, "tables", "import", str(sheet))
    run_cli(served, "agents", "copy", "table-analyst", "--table", "q4", "--name", "q4-analyst")
    said = run_cli(served, "chat", "q4-analyst", stdin="What are the total units by region?\n")
    assert "Total units by region" in said
    assert "north: 9; south: 7; east: 1." in said  # 5 + 4 in the north

    inputs = ["--input", "customer=ACME", "--input", "week=2026-11-30", "--input",
              'orders=[{"item": "bolts", "quantity": 120, "price": 0.25}, '
              '{"item": "nuts", "quantity": 80, "price": 12.5}]']  # fmt: skip
    run = json.loads(run_cli(served, "runs", "start", "weekly-report-filler", *inputs,
                             "--wait", "--json"))  # fmt: skip
    assert run["status"] == "succeeded", run
    [artifact] = json.loads(run_cli(served, "runs", "artifacts", run["id"], "--json"))
    pdf, markdown = tmp_path / "report.pdf", tmp_path / "report.md"
    run_cli(served, "runs", "artifact", run["id"], artifact["id"], "--as", "pdf", "-o", str(pdf))
    run_cli(served, "runs", "artifact", run["id"], artifact["id"], "-o", str(markdown))
    assert pdf.read_bytes().startswith(b"%PDF-")
    assert markdown.read_text().startswith("# Weekly report: ACME")
    assert "1030.00 in all" in markdown.read_text()

    said = run_cli(served, "chat", "support-assistant",
                   stdin="Who placed order A-1001 and what is in it?\n")  # fmt: skip
    assert "- placed_by: C-001 (Ada Lovelace)" in said
    assert "- contains: P-100 (Mechanical keyboard)" in said
