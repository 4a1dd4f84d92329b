"""``dhub runs ...``: start runs of agents on the server and watch them.

``start --wait`` and ``start --follow`` exit like ``dhub run``: 0 when the run succeeds (its
outputs on stdout as JSON), 1 when it fails or is cancelled (why, on stderr).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, cast

import typer

from dhub.cli._common import (
    AgentArgument,
    DocumentError,
    JsonOption,
    RunStatus,
    agent_names,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    labelled,
    reporting_errors,
    resolve_agent,
    when,
)

if TYPE_CHECKING:
    from dhub.cli._live import LiveView
    from dhub.client import Agent, Client, Run, RunEvent

app = typer.Typer(help="Start runs of agents on the server and watch them.", no_args_is_help=True)

Converted = Literal["html", "pdf"]
RunId = Annotated[str, typer.Argument(metavar="ID", help="The run id (run.…).")]


@app.command()
def start(
    ctx: typer.Context,
    agent: AgentArgument,
    input_: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            "-i",
            metavar="NAME=VALUE",
            help="An input (repeatable). VALUE is parsed as JSON when it can be, except that "
            "inputs the agent declares as strings are always text.",
        ),
    ] = None,
    inputs_json: Annotated[
        Path | None,
        typer.Option(
            help="A JSON object of inputs; --input values override its keys.", dir_okay=False
        ),
    ] = None,
    version: Annotated[
        int | None, typer.Option(min=1, help="Run this version (default: the latest).")
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the run to end; print its outputs.")
    ] = False,
    follow: Annotated[
        bool,
        typer.Option("--follow", help="Like --wait, showing its nodes live on stderr."),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(min=0, help="With --wait/--follow: give up after this many seconds."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Start a run and print its id (so `RUN=$(dhub runs start ...)` keeps it), or with
    --wait/--follow its outputs as JSON when it ends; --json: the run itself."""
    with reporting_errors():
        api = client_from(ctx)
        found = resolve_agent(api, agent)
        inputs = read_values(input_ or [], inputs_json, _text_inputs(found))
        run = api.start_run(found["id"], inputs, version=version)
        if not (wait or follow):
            _started(run, found, as_json)
            return
        try:
            finished = _follow(api, run.id, _live_view() if follow else None, timeout)
        except TimeoutError as exc:
            _stop(f"Error: {exc} It goes on: see `dhub runs get {run.id}`.")
    report(finished, as_json)


def _started(run: Run, agent: Agent, as_json: bool) -> None:
    """The run's id alone on stdout, what it is on stderr (as ``tokens create`` does)."""
    if as_json:
        echo_json(run.to_json())
        return
    typer.echo(
        f"Started {run.id} of {labelled(agent)}, version {run.agent_version} ({run.status}); "
        f"follow it with `dhub runs events {run.id} --follow`.",
        err=True,
    )
    typer.echo(run.id)


def _live_view() -> LiveView:
    from rich.console import Console

    from dhub.cli._live import LiveView

    return LiveView(Console(stderr=True))


@app.command()
def get(
    ctx: typer.Context,
    run_id: RunId,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="Wait for the run to end first (and for whoever it waits for)."
        ),
    ] = False,
    timeout: Annotated[
        float | None, typer.Option(min=0, help="With --wait: give up after this many seconds.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show a run: its agent, status, inputs, outputs or error, and what it waits for."""
    with reporting_errors():
        api = client_from(ctx)
        try:
            run = api.wait_run(run_id, timeout) if wait else api.get_run(run_id)
        except TimeoutError as exc:
            _stop(f"Error: {exc} It goes on: see `dhub runs get {run_id}`.")
        name = agent_names(api, [run.agent_id])[run.agent_id] if not as_json else ""
    if as_json:
        echo_json(run.to_json())
        return
    fields = [
        ("id", run.id),
        ("agent", f"{name} ({run.agent_id}), version {run.agent_version}"),
        ("status", _status(run)),
        ("user", run.user_id),
        ("created", when(run.created_at)),
        ("started", when(run.started_at)),
        ("finished", when(run.finished_at)),
        ("inputs", _compact(run.inputs)),
    ]
    if run.outputs is not None:
        fields.append(("outputs", _compact(run.outputs)))
    if run.error is not None:
        fields.append(("error", failure_line(run).removeprefix("Error: ")))
    echo_detail(fields, [])


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@app.command("list")
def list_(
    ctx: typer.Context,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Runs of this agent, by name or id (default: your own)."),
    ] = None,
    status: Annotated[RunStatus | None, typer.Option(help="Only runs in this state.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first: an agent's (--agent), else the ones you started."""
    with reporting_errors():
        api = client_from(ctx)
        agent_id = None if agent is None else resolve_agent(api, agent)["id"]
        runs = list(api.list_runs(agent_id, status=status))
        names = {} if as_json else agent_names(api, (r.agent_id for r in runs))
    if as_json:
        echo_json([r.to_json() for r in runs])
    elif not runs:
        typer.echo("No runs found.")
    else:
        echo_table(
            ["ID", "AGENT", "VERSION", "STATUS", "STARTED", "FINISHED"],
            [_row(r, names) for r in runs],
        )


def _status(run: Run) -> str:
    status: str = run.status
    if run.waiting:  # say for what: input, confirmation, a timer...
        status += f" ({run.waiting.get('for')} at {run.waiting.get('node_id')})"
    return status


def _row(run: Run, names: dict[str, str]) -> list[str]:
    return [
        run.id,
        names.get(run.agent_id, run.agent_id),
        str(run.agent_version),
        _status(run),
        when(run.started_at),
        when(run.finished_at),
    ]


@app.command()
def events(
    ctx: typer.Context,
    run_id: RunId,
    after: Annotated[int, typer.Option(min=0, help="Only events after this seq.")] = 0,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing events until the run ends.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print each event as one line of JSON.")
    ] = False,
) -> None:
    """Print a run's events (seq, time, type, node and what it says)."""
    with reporting_errors():
        api = client_from(ctx)
        found: Iterable[RunEvent] = (
            api.stream_run_events(run_id, after) if follow else api.run_events(run_id, after)
        )
        for event in found:
            typer.echo(json.dumps(event.to_json(), ensure_ascii=False) if as_json else _line(event))


def _line(event: RunEvent) -> str:
    data = json.dumps(event.data, ensure_ascii=False) if event.data else ""
    return "  ".join(
        [str(event.seq), when(event.created_at), event.type, event.node_id or "-", data]
    ).rstrip()


@app.command()
def cancel(ctx: typer.Context, run_id: RunId, as_json: JsonOption = False) -> None:
    """Cancel a run that has not finished."""
    with reporting_errors():
        run = client_from(ctx).cancel_run(run_id)
    done(as_json, f"{run.status} {run.id}", run.to_json())


@app.command()
def artifacts(ctx: typer.Context, run_id: RunId, as_json: JsonOption = False) -> None:
    """List the documents a run made (rendered templates), oldest first."""
    with reporting_errors():
        found = client_from(ctx).list_artifacts(run_id)
    if as_json:
        echo_json([dataclasses.asdict(a) for a in found])
    elif not found:
        typer.echo("No artifacts.")
    else:
        rows = [[a.id, a.name, a.media_type.split(";")[0], str(a.size), a.node_id or "-",
                 when(a.created_at)] for a in found]  # fmt: skip
        echo_table(["ID", "NAME", "TYPE", "BYTES", "NODE", "CREATED"], rows)


@app.command()
def artifact(
    ctx: typer.Context,
    run_id: RunId,
    artifact_id: Annotated[str, typer.Argument(metavar="ARTIFACT_ID", help="artifact.…")],
    out: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here (default: its own name; - for stdout)."),
    ] = None,
    as_: Annotated[
        str | None, typer.Option("--as", help="html or pdf: converted (Markdown, HTML, text).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Download one artifact of a run (into a file named like it, unless -o says where)."""
    import sys

    with reporting_errors():
        api = client_from(ctx)
        if as_ is None or as_ == "source":
            found = api.download_artifact(run_id, artifact_id)
        elif as_ in ("html", "pdf"):
            found = api.download_artifact(run_id, artifact_id, format=cast(Converted, as_))
        else:
            raise DocumentError(f"--as is html or pdf, not {as_!r}")
    if out is not None and str(out) == "-":
        sys.stdout.buffer.write(found.content)
        sys.stdout.flush()
        return
    target = out or Path(found.name)
    target.write_bytes(found.content)
    kind = found.media_type.split(";")[0]
    saved = {"path": str(target), "size": len(found.content), "media_type": found.media_type}
    done(as_json, f"wrote {target} ({len(found.content)} bytes, {kind})", saved)


# -- shared with `dhub tasks` and `dhub chat` --------------------------------------------------


def read_values(pairs: list[str], json_file: Path | None, texts: set[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs over a JSON object file. A VALUE is JSON when it parses (so
    ``n=3`` is a number), except for the names in ``texts``, which the receiver declares as
    strings and so always get the text (``ticket=123`` stays "123")."""
    values = _json_object(json_file) if json_file else {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise DocumentError(f"expected NAME=VALUE, got {pair!r}")
        values[name] = raw if name in texts else _json_or_text(raw)
    return values


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DocumentError(f"cannot read {path} as JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise DocumentError(f"{path} must hold a JSON object, not {type(value).__name__}")
    return value


def _text_inputs(agent: Agent) -> set[str]:
    """The start variables the agent declares as strings (none for a react agent)."""
    for node in agent.get("nodes") or []:
        if node.get("type") == "start":
            variables = (node.get("config") or {}).get("variables") or []
            return {v["name"] for v in variables if v.get("type") == "string"}
    return set()


def _follow(api: Client, run_id: str, view: LiveView | None, timeout: float | None) -> Run:
    """Wait for the run to end, showing its events on ``view``; either way a run that stops
    to wait for a person says so on stderr, with the command that answers it."""
    for event in api.stream_run_events(run_id, timeout=timeout):
        if view is not None:
            view.show(trace_of(event))
        if event.type == "node.waiting":
            hint_waiting(run_id, event)
    return api.get_run(run_id)


def trace_of(event: RunEvent) -> dict[str, Any]:
    """The event as the engine produced it, which is what LiveView draws."""
    head: dict[str, Any] = {"type": event.type, "time": event.created_at / 1000}
    if event.node_id is not None:
        head["node_id"] = event.node_id
    return {**head, **event.data}


def hint_waiting(run_id: str, event: RunEvent) -> None:
    waiting_for = event.data.get("waiting_for")
    node = event.node_id or "?"
    if waiting_for == "input":
        hint = f"dhub tasks answer {run_id} {node} --value NAME=VALUE"
    elif waiting_for == "confirmation":
        hint = f"dhub tasks list, then dhub tasks approve|reject {run_id} <ID>"
    else:
        return
    typer.echo(f"Run {run_id} waits for {waiting_for} at '{node}': {hint}", err=True)


def report(run: Run, as_json: bool = False) -> None:
    """The outputs of a succeeded run on stdout (``as_json``: the run); else why it did not
    succeed, exit 1."""
    if as_json:
        echo_json(run.to_json())
    elif run.status == "succeeded":
        echo_json(run.outputs or {})
    if run.status != "succeeded":
        _stop(failure_line(run))


def failure_line(run: Run) -> str:
    """Why a finished run did not succeed, in one line."""
    if run.status == "cancelled":
        return f"Error: run {run.id} was cancelled."
    error = run.error or {}
    where = f"node '{error['node_id']}' failed" if error.get("node_id") else "the run failed"
    kind = f" ({error['kind']})" if error.get("kind") else ""
    return f"Error: {where}{kind}: {error.get('message') or run.status}"


def _stop(line: str) -> NoReturn:
    typer.echo(line, err=True)
    raise typer.Exit(1)
