"""``dhub chat`` against a real app (SQLite and PostgreSQL). Most tests go through CliRunner
with the SDK on the conftest's TestClient; its stdin is not a terminal, so they are the
non-interactive sessions (messages are the lines of stdin, the transcript is stdout). The last
one runs the command on a pseudo-terminal against the app served on a socket, as a person
would: forms asked inline, Ctrl-C, Ctrl-D."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner, Result

from dhub.api.app import create_app
from dhub.cli.main import app
from dhub.client import Client
from dhub.settings import Settings
from tests.conftest import ADMIN_TOKEN
from tests.e2e.test_serve import DHUB
from tests.integration.test_conversations_api import ECHO
from tests.support.served import serving

# A chat turn that stops at a form before it replies.
ASKING = {
    **ECHO,
    "name": "asking",
    "nodes": [
        *ECHO["nodes"][:2],
        {"id": "ask", "type": "human_input", "config": {
            "prompt": "Say '{{ sys.message }}'?",
            "input_fields": [{"name": "ok", "type": "boolean", "description": "Go ahead?"}]}},
        {"id": "reply", "type": "template", "config": {
            "template": "{{ sys.message }}, ok={{ ok }}", "output": "answer"}},
        ECHO["nodes"][3],
    ],
    "edges": [{"source": "start", "target": "count"}, {"source": "count", "target": "ask"},
              {"source": "ask", "target": "reply"}, {"source": "reply", "target": "end"}],
}  # fmt: skip

# A chat turn that fails: its template names a variable nobody wrote.
BROKEN = {
    **ECHO,
    "name": "broken",
    "nodes": [
        *ECHO["nodes"][:2],
        {"id": "reply", "type": "template", "config": {
            "template": "{{ nowhere }}", "output": "answer"}},
        ECHO["nodes"][3],
    ],
}  # fmt: skip


@pytest.fixture
def api(client: TestClient) -> Client:
    return Client(str(client.base_url), ADMIN_TOKEN, http=client)


@pytest.fixture
def dhub(api: Client) -> Any:
    runner = CliRunner()

    def run(*args: str | Path, input: str = "") -> Result:
        return runner.invoke(app, [str(a) for a in args], obj=api, input=input)

    return run


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def conversation_of(result: Result) -> str:
    found = re.search(r"--conversation (conversation\.\S+)", result.stderr)
    assert found, result.stderr
    return found.group(1)


def test_two_turns_share_the_conversation_variables(dhub: Any, api: Client) -> None:
    agent = api.create_agent(ECHO)["id"]
    result = ok(dhub("chat", "echo", input="hello\n\nagain\n"))  # by name; blank lines skipped
    # The second turn counts from what the first one left in conversation.turns.
    assert result.stdout == "you> hello\n#1: HELLO\nyou> again\n#2: AGAIN\n"
    conversation = conversation_of(result)
    assert f"Chatting with echo ({agent}) in conversation {conversation}." in result.stderr
    assert "✓ reply" in result.stderr  # the nodes, live
    saved = api.get_conversation(conversation)
    assert saved.variables == {"turns": 2}
    assert [(m.role, m.content) for m in saved.messages] == [
        ("user", "hello"), ("assistant", "#1: HELLO"),
        ("user", "again"), ("assistant", "#2: AGAIN"),
    ]  # fmt: skip


def test_a_conversation_is_continued_after_its_history(dhub: Any, api: Client) -> None:
    agent = api.create_agent(ECHO)["id"]
    first = ok(dhub("chat", agent, "--quiet", input="hello\n"))
    conversation = conversation_of(first)
    assert "✓" not in first.stderr  # --quiet: no nodes

    again = ok(dhub("chat", agent, "--conversation", conversation, input="more\n"))
    assert again.stdout == "you> hello\n#1: HELLO\nyou> more\n#2: MORE\n"
    assert conversation_of(again) == conversation
    assert api.get_conversation(conversation).variables == {"turns": 2}


def test_exit_and_quit_end_the_session(dhub: Any, api: Client) -> None:
    api.create_agent(ECHO)
    for leave in ("/exit", "/quit"):
        result = ok(dhub("chat", "echo", "-q", input=f"hi\n{leave}\nnever sent\n"))
        assert result.stdout == "you> hi\n#1: HI\n"
        assert len(api.get_conversation(conversation_of(result)).messages) == 2


def test_an_unknown_agent_is_a_clear_error(dhub: Any, api: Client) -> None:
    for ref in ("nope", "agent.nope"):
        result = dhub("chat", ref, input="hello\n")
        assert result.exit_code == 1, result.output
        assert result.stderr.splitlines() == [  # not id-shaped (agent.<ulid>): a name
            f"Error: no agent named '{ref}' that you can see.",
            "`dhub agents list` shows the ones you can.",
        ]
        assert "Traceback" not in result.output and result.stdout == ""


def test_a_conversation_of_another_agent_is_refused(dhub: Any, api: Client) -> None:
    echo = api.create_agent(ECHO)["id"]
    other = api.create_agent({**ECHO, "name": "other"})["id"]
    conversation = api.create_conversation(echo).id
    result = dhub("chat", other, "--conversation", conversation, input="hello\n")
    assert result.exit_code == 1
    assert f"Conversation {conversation} is with agent {echo}, not other" in result.stderr
    missing = dhub("chat", echo, "--conversation", "conversation.nope")
    assert missing.exit_code == 1 and "(HTTP 404)" in missing.stderr


def test_an_event_agent_cannot_chat(dhub: Any, api: Client) -> None:
    api.create_agent({**ECHO, "name": "evented", "input_mode": "event"})
    result = dhub("chat", "evented", input="hello\n")
    assert result.exit_code == 1
    assert "(HTTP 422)" in result.stderr and "takes events, not chat messages" in result.stderr


def test_a_failed_turn_says_why_and_ends_the_session(dhub: Any, api: Client) -> None:
    api.create_agent(BROKEN)
    result = dhub("chat", "broken", input="hello\nagain\n")
    assert result.exit_code == 1, result.output
    assert result.stdout == "you> hello\n"  # the second line is never sent
    assert "Error: node 'reply' failed" in result.stderr and "nowhere" in result.stderr
    conversation = api.get_conversation(conversation_of(result))
    assert [m.role for m in conversation.messages] == ["user"]  # no reply from a failed turn


def test_a_turn_that_waits_for_a_form_says_how_to_answer_it(dhub: Any, api: Client) -> None:
    api.create_agent(ASKING)

    def answer_when_asked() -> None:
        # Someone else answers, as `dhub tasks answer` would, while the chat waits.
        for _ in range(1000):
            tasks = api.list_tasks()
            if tasks:
                api.answer_input(tasks[0].run_id, "ask", {"ok": True})
                return
            time.sleep(0.02)

    answerer = threading.Thread(target=answer_when_asked)
    answerer.start()
    result = dhub("chat", "asking", input="go\n")
    answerer.join()
    assert result.exit_code == 0, result.output
    assert result.stdout == "you> go\ngo, ok=True\n"
    assert re.search(
        r"Run (run\.\S+) waits for input at 'ask': dhub tasks answer \1 ask --value", result.stderr
    ), result.stderr


class Terminal:
    """A command on a pseudo-terminal, as a person runs it: stdin and stdout are a TTY."""

    def __init__(self, argv: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DHUB_")}
        self.fd, tty = pty.openpty()
        # Not pty.fork: forking a process that runs threads (the server) is unsafe.
        self.proc = subprocess.Popen(
            argv, stdin=tty, stdout=tty, stderr=tty, env={**env, "NO_COLOR": "1"},
            start_new_session=True,
        )  # fmt: skip
        os.close(tty)
        self.seen = b""

    def expect(self, text: str, seconds: float = 30) -> None:
        """Read until ``text`` appears, and forget everything up to it."""
        wanted, deadline = text.encode(), time.monotonic() + seconds
        while wanted not in self.seen:
            ready, _, _ = select.select([self.fd], [], [], max(deadline - time.monotonic(), 0))
            chunk = os.read(self.fd, 4096) if ready else b""
            if not chunk:
                raise AssertionError(f"no {text!r} on the terminal; it shows:\n{self.seen!r}")
            self.seen += chunk
        self.seen = self.seen[self.seen.index(wanted) + len(wanted) :]

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def ctrl_c(self) -> None:
        time.sleep(0.2)  # a person's pace: the prompt is fully written before the key
        self.proc.send_signal(signal.SIGINT)  # what the terminal sends for Ctrl-C

    def ctrl_d(self) -> None:
        time.sleep(0.2)
        os.write(self.fd, b"\x04")

    def exit_code(self) -> int:
        code = self.proc.wait(30)
        os.close(self.fd)
        return code


@pytest.fixture
def served(settings: Settings) -> Iterator[str]:
    """The app on a real socket (uvicorn in a thread), for a CLI in another process."""
    with serving(create_app(settings)) as url:
        yield url


def test_at_a_terminal_forms_are_asked_and_ctrl_c_stops_waiting(served: str) -> None:
    with Client(served, ADMIN_TOKEN) as sdk:
        sdk.create_agent(ASKING)
    term = Terminal([str(DHUB), "--url", served, "--token", ADMIN_TOKEN, "chat", "asking"])
    term.expect("you> ")
    term.type("go")
    term.expect("? ask: Say 'go'?")
    term.expect("[y/n]: ")
    term.type("maybe")
    term.expect("answer y or n")  # asked again
    term.type("y")
    term.expect("go, ok=True")  # the reply
    term.expect("you> ")
    term.type("later")
    term.expect("[y/n]: ")
    term.ctrl_c()  # stops waiting, not the program
    term.expect("waits for input at 'ask': dhub tasks answer run.")
    term.expect("Stopped waiting. The turn goes on as run run.")
    term.expect("you> ")
    term.ctrl_d()  # at the prompt: leave
    assert term.exit_code() == 0

    with Client(served, ADMIN_TOKEN) as sdk:
        [waiting, answered] = sdk.list_runs()
        assert (waiting.status, answered.status) == ("waiting", "succeeded")
        [task] = sdk.list_tasks()
        assert task.run_id == waiting.id
