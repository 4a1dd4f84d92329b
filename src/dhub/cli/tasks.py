"""``dhub tasks ...``: the human side of runs on the server: the input forms and actor
confirmations waiting for you, and answering them."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from dhub.cli._common import (
    JsonOption,
    agent_names,
    client_from,
    done,
    echo_json,
    echo_table,
    reporting_errors,
    when,
)
from dhub.cli.runs import read_values

if TYPE_CHECKING:
    from dhub.client import Client, Task
    from dhub.engine.state import AwaitConfirmation, AwaitInput

app = typer.Typer(help="Answer the forms and confirmations runs wait for.", no_args_is_help=True)

RunId = Annotated[str, typer.Argument(metavar="RUN_ID", help="The run id (run.…).")]
CallId = Annotated[
    str, typer.Argument(metavar="CALL_ID", help="The confirmation's id (ID in `dhub tasks list`).")
]


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List the forms and confirmations you may answer, oldest first."""
    with reporting_errors():
        api = client_from(ctx)
        tasks = api.list_tasks()
        agents = {} if as_json else _agents_of(api, tasks)
    if as_json:
        echo_json([t.to_json() for t in tasks])
    elif not tasks:
        typer.echo("No tasks waiting for you.")
    else:
        echo_table(
            ["RUN", "AGENT", "NODE", "KIND", "ID", "ASKS", "DUE"],
            [_row(t, agents.get(t.run_id, "?")) for t in tasks],
        )


def _agents_of(api: Client, tasks: list[Task]) -> dict[str, str]:
    """The name of the agent each task's run runs, by run id (an assignee who may not read
    the run gets no name: "?")."""
    from dhub.client import Forbidden, NotFound

    runs: dict[str, str] = {}
    for run_id in dict.fromkeys(t.run_id for t in tasks):
        with contextlib.suppress(NotFound, Forbidden):
            runs[run_id] = api.get_run(run_id).agent_id
    names = agent_names(api, runs.values())
    return {run_id: names[agent_id] for run_id, agent_id in runs.items()}


def _row(task: Task, agent: str) -> list[str]:
    kind = "input" if task.kind == "await_input" else "confirm"
    due = when(int(task.due_at * 1000)) if task.due_at is not None else "-"
    node = f"{task.node_id} [{task.frame}]" if task.frame else task.node_id
    return [task.run_id, agent, node, kind, task.command_id, _asks(task), due]


def _asks(task: Task) -> str:
    request = task.request
    if task.kind == "await_input":
        return str(request.get("prompt") or "")
    return f"{request.get('actor')}({_short_args(request.get('arguments') or {})})"


def _short_args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())


@app.command()
def answer(
    ctx: typer.Context,
    run_id: RunId,
    node_id: Annotated[str, typer.Argument(metavar="NODE_ID", help="The waiting node's id.")],
    value: Annotated[
        list[str] | None,
        typer.Option(
            "--value",
            "-v",
            metavar="NAME=VALUE",
            help="A field's value (repeatable); JSON when it parses, except for text fields.",
        ),
    ] = None,
    values_json: Annotated[
        Path | None,
        typer.Option(help="A JSON object of values; --value overrides its keys.", dir_okay=False),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(min=0, help="How long to wait for a run still going to reach the form."),
    ] = 60.0,
    as_json: JsonOption = False,
) -> None:
    """Answer a human_input node. Without values, at a terminal, asks field by field. A run
    that has not reached the form yet (just started) is waited for, up to --timeout."""
    with reporting_errors():
        api = client_from(ctx)
        task = _find(api, run_id, node_id) or _reached(api, run_id, node_id, timeout)
        if value or values_json or not sys.stdin.isatty():
            values = read_values(value or [], values_json, _text_fields(task))
        else:
            values = _ask(run_id, node_id, task)
        api.answer_input(run_id, node_id, values)
    result = {"run_id": run_id, "node_id": node_id, "answered": True}
    done(as_json, f"answered {node_id} of {run_id}", result)


def _find(api: Client, run_id: str, node_id: str) -> Task | None:
    """The open form, for its field types; None lets the server say what is wrong."""
    for task in api.list_tasks():
        if (task.run_id, task.node_id, task.kind) == (run_id, node_id, "await_input"):
            return task
    return None


def _reached(api: Client, run_id: str, node_id: str, timeout: float) -> Task | None:
    """The form, once a run that is still queued or running stops to wait for a person;
    None when it stopped elsewhere or ended (the server then says what is wrong)."""
    if api.get_run(run_id).status not in ("queued", "running"):
        return None
    try:
        for event in api.stream_run_events(run_id, timeout=timeout):
            # The stream replays the run's past too: an old wait, since answered, is passed.
            if event.type == "node.waiting":
                task = _find(api, run_id, node_id)
                if task is not None or api.get_run(run_id).status == "waiting":
                    return task
    except TimeoutError:
        _stop(f"Error: run {run_id} did not reach '{node_id}' within {timeout:g}s.")
    return None


def _text_fields(task: Task | None) -> set[str]:
    fields = task.request.get("fields") or [] if task else []
    return {f["name"] for f in fields if f.get("type") == "string" and not f.get("options")}


def _ask(run_id: str, node_id: str, task: Task | None) -> dict[str, Any]:
    from rich.console import Console

    from dhub.cli._live import LiveView, TerminalHuman
    from dhub.runtime.ports import PortError

    if task is None:
        _stop(f"Error: run {run_id} is not waiting for your input at '{node_id}'.")
    try:
        return TerminalHuman(LiveView(Console(stderr=True))).fill(input_request(task))
    except PortError as exc:
        _stop(f"Error: {exc}")


def input_request(task: Task) -> AwaitInput:
    """An ``await_input`` task as the form TerminalHuman asks."""
    from dhub.engine.state import AwaitInput

    return AwaitInput(
        command_id=task.command_id,
        node_id=task.node_id,
        prompt=str(task.request.get("prompt") or ""),
        fields=list(task.request.get("fields") or []),
        assignees=task.assignees,
        timeout_at=task.due_at,
        frame=task.frame,
    )


def confirmation_request(task: Task) -> AwaitConfirmation:
    """An ``await_confirmation`` task as the question TerminalHuman asks."""
    from dhub.engine.state import AwaitConfirmation

    return AwaitConfirmation(
        command_id=task.command_id,
        node_id=task.node_id,
        actor=str(task.request.get("actor") or ""),
        arguments=dict(task.request.get("arguments") or {}),
        frame=task.frame,
    )


@app.command()
def approve(
    ctx: typer.Context,
    run_id: RunId,
    call_id: CallId,
    arguments_json: Annotated[
        Path | None,
        typer.Option(
            help="Call the actor with these arguments (a JSON object) instead.", dir_okay=False
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Approve an actor call, as asked or with edited arguments."""
    with reporting_errors():
        arguments = read_values([], arguments_json, set()) if arguments_json else None
        client_from(ctx).confirm_call(run_id, call_id, True, arguments=arguments)
    result = {"run_id": run_id, "call_id": call_id, "approved": True}
    done(as_json, f"approved {call_id} of {run_id}", result)


@app.command()
def reject(
    ctx: typer.Context,
    run_id: RunId,
    call_id: CallId,
    reason: Annotated[
        str, typer.Option(help="Why (kept with the decision, shown in the run's events).")
    ],
    as_json: JsonOption = False,
) -> None:
    """Reject an actor call."""
    with reporting_errors():
        client_from(ctx).confirm_call(run_id, call_id, False, reason=reason)
    result = {"run_id": run_id, "call_id": call_id, "approved": False, "reason": reason}
    done(as_json, f"rejected {call_id} of {run_id}", result)


def _stop(line: str) -> NoReturn:
    typer.echo(line, err=True)
    raise typer.Exit(1)
