"""``dhub chat AGENT``: talk with a chat agent on the server, one message per line.

stdout holds the conversation as it reads at the terminal: each message sent, after ``you> ``,
then the reply. Everything about it goes to stderr: the conversation id, each node as it runs,
what a turn waits for, errors. So ``dhub chat bot < questions.txt > transcript.txt`` keeps the
transcript alone.

At a terminal, a form or a confirmation the turn waits for is asked right there; otherwise
the command that answers it (``dhub tasks ...``) is shown and the turn is waited for, since
stdin carries the messages, not answers.

A reply the server's demo model wrote (no real model provider configured; docs/providers.md)
comes after a ``[demo model: ...]`` line on stdout, which says how to configure a real one.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from dhub.cli._common import (
    AgentArgument,
    client_from,
    error_lines,
    reporting_errors,
    resolve_agent,
)
from dhub.cli.runs import failure_line, hint_waiting, trace_of
from dhub.cli.tasks import confirmation_request, input_request

if TYPE_CHECKING:
    from dhub.cli._live import TerminalHuman
    from dhub.client import Agent, Client, Conversation, RunEvent, Task, Turn

PROMPT = "you> "
DEMO = "demo"  # usage.model of the demo model's answers
LEAVE = ("/exit", "/quit")


class _StopWaiting(Exception):
    """The person gave up on the turn while asked its form or confirmation (Ctrl-C, or the
    end of input): back to the prompt, while the turn goes on and waits for an answer."""

    def __init__(self, event: RunEvent) -> None:
        super().__init__(event.node_id)
        self.event = event


def chat(
    ctx: typer.Context,
    agent: AgentArgument,
    conversation: Annotated[
        str | None,
        typer.Option(
            "--conversation",
            "-c",
            metavar="ID",
            help="Continue this conversation (its messages are printed first).",
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Show only the conversation, not each node run."),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="For scripts: print each turn as one line of JSON (conversation_id, run_id, "
            "message, status, reply, error) instead of the transcript.",
        ),
    ] = False,
) -> None:
    """Chat with an agent: each line is a message, answered by one run of the agent.

    Leave with Ctrl-D, /exit or /quit; Ctrl-C stops waiting for a reply (the turn goes on).
    When stdin is not a terminal, its lines are the messages, and the first turn that fails
    ends the command with status 1.
    """
    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        session = _session(api, found, conversation, quiet, as_json)
    session.run()
    if session.failed and not session.interactive:
        raise typer.Exit(1)


def _session(
    api: Client, agent: Agent, conversation_id: str | None, quiet: bool, as_json: bool
) -> _Chat:
    from dhub.client import DhubClientError

    if conversation_id is None:
        conversation = api.create_conversation(agent["id"])
    else:
        conversation = api.get_conversation(conversation_id)
        if conversation.agent_id != agent["id"]:
            raise DhubClientError(
                f"Conversation {conversation.id} is with agent {conversation.agent_id}, not "
                f"{agent['name']} ({agent['id']})."
            )
    return _Chat(api, agent, conversation, quiet, as_json)


class _Chat:
    def __init__(
        self, api: Client, agent: Agent, conversation: Conversation, quiet: bool, as_json: bool
    ) -> None:
        from rich.console import Console

        from dhub.cli._live import LiveView

        self.api = api
        self.agent = agent
        self.conversation = conversation
        self.interactive = sys.stdin.isatty()
        self.as_json = as_json
        self.failed = False
        self.console = Console(stderr=True)
        self.view = None if quiet else LiveView(self.console)
        self.demo_answered = False  # this turn's reply came from the demo model
        self._configure: str | None = None  # how to configure a real model, once asked

    def run(self) -> None:
        if self.interactive:
            with contextlib.suppress(ImportError):  # not on every platform
                import readline  # noqa: F401  (gives input() line editing and history)
        self._intro()
        while (line := self._read()) is not None:
            text = line.strip()
            if not text:
                continue
            if text in LEAVE:
                return
            if not self.interactive and not self.as_json:
                typer.echo(PROMPT + text)  # so that stdout reads like the session
            if not self._turn(text) and not self.interactive:
                return

    def _intro(self) -> None:
        conversation, agent = self.conversation, self.agent
        self._note(
            f"Chatting with {agent['name']} ({agent['id']}) in conversation {conversation.id}."
        )
        self._note(f"Continue it later: dhub chat {agent['id']} --conversation {conversation.id}")
        if self.interactive:
            self._note("Leave with Ctrl-D or /exit; Ctrl-C stops waiting for a reply.", "dim")
        if self.as_json:
            return  # the history is `dhub runs`' and the API's to give, not a turn's line
        for message in conversation.messages:
            typer.echo(PROMPT + message.content if message.role == "user" else message.content)

    def _read(self) -> str | None:
        """The next message line; None at the end of the input."""
        if not self.interactive:
            return sys.stdin.readline() or None
        while True:
            try:
                return input(PROMPT)
            except EOFError:
                typer.echo()  # end the prompt's line, as a shell does
                return None
            except KeyboardInterrupt:
                typer.echo()  # Ctrl-C at the prompt drops the line, as a shell does

    def _turn(self, text: str) -> bool:
        """Send one message and show its turn; False when it did not succeed."""
        from dhub.client import DhubClientError

        run_id: str | None = None
        self.demo_answered = False
        try:
            with self.api.stream_message(self.conversation.id, text) as turn:
                run_id = turn.run_id
                for event in turn:
                    self._show(run_id, event)
                finished = turn.result()
        except KeyboardInterrupt:
            self._stopped(run_id, None)
            return True
        except _StopWaiting as stop:
            self._stopped(run_id, stop.event)
            return True
        except DhubClientError as exc:
            return self._failed(error_lines(exc))
        if self.as_json:
            self._echo_turn(text, finished)
        if finished.run.status != "succeeded":
            return self._failed([failure_line(finished.run)])
        if not self.as_json:
            if self.demo_answered:
                typer.echo(self._demo_label())
            typer.echo(finished.reply if finished.reply is not None else "")
        return True

    def _echo_turn(self, text: str, turn: Turn) -> None:
        line = {
            "conversation_id": self.conversation.id,
            "run_id": turn.run_id,
            "message": text,
            "status": turn.run.status,
            "reply": turn.reply,
            "demo_model": self.demo_answered,  # the reply is the demo model's, not an LLM's
            "error": turn.run.error,
        }
        typer.echo(json.dumps(line, ensure_ascii=False))

    def _demo_label(self) -> str:
        """The line before a reply the demo model wrote (docs/providers.md): it says so, and
        how to configure a real model."""
        from dhub.client import DhubClientError

        if self._configure is None:
            try:
                how = self.api.resolve_provider(_provider_of(self.agent)).get("configure")
            except DhubClientError:
                how = None
            self._configure = str(how or "configure a model provider (docs/providers.md)")
        return f"[demo model: not a real LLM; for real answers, {self._configure} on the server]"

    def _show(self, run_id: str, event: RunEvent) -> None:
        usage = event.data.get("usage")
        if isinstance(usage, dict) and usage.get("model") == DEMO:
            self.demo_answered = True
        if self.view is not None and event.node_id is not None:
            self.view.show(trace_of(event))
        if event.type == "node.waiting":
            self._waiting(run_id, event)

    def _waiting(self, run_id: str, event: RunEvent) -> None:
        """Answer the form or confirmation here, at a terminal; else say how to."""
        task = self._task(run_id, event) if self.interactive else None
        if task is None:
            hint_waiting(run_id, event)
            return
        from dhub.cli._live import LiveView, TerminalHuman
        from dhub.client import DhubClientError
        from dhub.runtime.ports import PortError

        human = TerminalHuman(LiveView(self.console))
        try:
            if task.kind == "await_input":
                self._answer(human, task)
            else:
                decision = human.decide(confirmation_request(task))
                self.api.confirm_call(
                    run_id, task.command_id, decision.approve, reason=decision.reason
                )
        except (PortError, KeyboardInterrupt) as exc:  # no answer after all: say how, later
            raise _StopWaiting(event) from exc
        except DhubClientError as exc:
            # Answered elsewhere, timed out meanwhile...: the events say what happens next.
            for line in error_lines(exc):
                self._note(line, "yellow")

    def _answer(self, human: TerminalHuman, task: Task) -> None:
        from dhub.client import InvalidInput

        request, problem = input_request(task), None
        while True:
            values = human.fill(request, problem)
            try:
                self.api.answer_input(task.run_id, task.node_id, values)
                return
            except InvalidInput as exc:  # ask again, saying what was wrong
                problem = "; ".join(e.message for e in exc.errors) or exc.detail

    def _task(self, run_id: str, event: RunEvent) -> Task | None:
        """The task the event opened, if it is the caller's to answer."""
        frame = event.data.get("frame", "")
        for task in self.api.list_tasks():
            if (task.run_id, task.node_id, task.frame) == (run_id, event.node_id, frame):
                return task
        return None

    def _stopped(self, run_id: str | None, waiting: RunEvent | None) -> None:
        typer.echo(err=True)  # end the line the interrupted prompt or progress was on
        if run_id is not None and waiting is not None:
            hint_waiting(run_id, waiting)
        if run_id is None:
            self._note("Interrupted while sending: the message may not have been sent.")
            return
        self._note(
            f"Stopped waiting. The turn goes on as run {run_id} and its reply joins the "
            f"conversation when it ends (`dhub runs get {run_id}`; `dhub runs cancel {run_id}` "
            "stops it)."
        )

    def _failed(self, lines: list[str]) -> bool:
        for line in lines:
            typer.echo(line, err=True)
        self.failed = True
        return False

    def _note(self, text: str, style: str = "") -> None:
        self.console.print(text, style=style, soft_wrap=True, highlight=False, markup=False)


def _provider_of(agent: Agent) -> str:
    """The model provider the agent's replies come from: a react agent's, else its first
    ``llm`` node's."""
    config = agent.get("agent") or {}
    if config.get("model_provider"):
        return str(config["model_provider"])
    for node in agent.get("nodes") or []:
        if node.get("type") == "llm" and (node.get("config") or {}).get("model_provider"):
            return str(node["config"]["model_provider"])
    return "openai"
