"""``dhub triggers ...``: the webhooks and schedules that start an event agent's runs
(docs/triggers.md), their history, and ``send``: a signed delivery to a webhook, as an outside
system would post one. A trigger is named by its id (``trigger.…``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dhub.cli._common import (
    AgentArgument,
    DocumentError,
    JsonOption,
    client_from,
    done,
    echo_detail,
    echo_json,
    echo_table,
    load_document,
    reporting_errors,
    when,
)

if TYPE_CHECKING:
    from dhub.client import Client, Trigger

app = typer.Typer(
    help="Webhooks and schedules that start an event agent's runs.", no_args_is_help=True
)

TriggerArgument = Annotated[
    str, typer.Argument(metavar="TRIGGER", help="The trigger's id (trigger.…).")
]
SHOWN_ONCE = (
    "The secret is shown this once: keep it now (`dhub triggers rotate-secret` makes another)."
)


def status_of(trigger: Trigger) -> str:
    """``active``, ``disabled``, or ``stopped: <why>``."""
    if trigger.get("stopped_reason"):
        return f"{trigger.get('status')}: {trigger['stopped_reason']}"
    return str(trigger.get("status") or ("active" if trigger.get("enabled") else "disabled"))


def where(trigger: Trigger) -> str:
    """What a trigger listens to: a webhook's URL, a schedule's rule and its next fire."""
    if trigger.get("url"):
        return str(trigger["url"])
    config = {k: v for k, v in (trigger.get("config") or {}).items() if k != "type"}
    rule = " ".join(f"{k}={v}" for k, v in config.items() if k in ("cron", "every", "timezone"))
    fires = trigger.get("next_fires") or []
    return f"{rule}; next {fires[0]}" if fires else rule


@app.command("list")
def list_(ctx: typer.Context, agent: AgentArgument, as_json: JsonOption = False) -> None:
    """List an agent's triggers (you need to be one of its editors)."""
    with reporting_errors():
        found = client_from(ctx).list_triggers(agent)
    if as_json:
        echo_json(found)
    elif not found:
        typer.echo("No triggers.")
    else:
        rows = [[t["id"], t.get("name", ""), t.get("type", ""), status_of(t),
                 t.get("runs_as", ""), where(t)] for t in found]  # fmt: skip
        echo_table(["ID", "NAME", "TYPE", "STATUS", "RUNS AS", "WHERE"], rows)


@app.command()
def create(
    ctx: typer.Context,
    agent: AgentArgument,
    file: Annotated[
        Path,
        typer.Option("--file", "-f", help="The trigger (JSON or YAML: name, config; - for stdin)."),
    ],
    as_json: JsonOption = False,
) -> None:
    """Make a trigger that starts the agent's runs as you. A webhook's secret is printed once."""
    with reporting_errors():
        made = client_from(ctx).create_trigger(agent, load_document(file))
    if as_json:
        echo_json(made)
        return
    typer.echo(f"created {made['id']} ({made.get('type')})")
    _print_access(made)


def _print_access(trigger: Trigger) -> None:
    if trigger.get("url"):
        typer.echo(f"url:    {trigger['url']}")
    if trigger.get("secret"):
        typer.echo(f"secret: {trigger['secret']}")
        typer.echo(SHOWN_ONCE, err=True)


@app.command()
def get(
    ctx: typer.Context, agent: AgentArgument, trigger: TriggerArgument, as_json: JsonOption = False
) -> None:
    """Show a trigger: its config, status (and why it stopped), whom it runs as."""
    with reporting_errors():
        found = client_from(ctx).get_trigger(agent, trigger)
    if as_json:
        echo_json(found)
        return
    config = found.get("config") or {}
    fields = [
        ("id", found["id"]),
        ("name", found.get("name", "")),
        ("type", found.get("type", "")),
        ("status", status_of(found)),
        ("runs as", found.get("runs_as", "")),
        ("updated", when(found.get("updated_at"))),
    ]
    if found.get("url"):
        fields.append(("url", found["url"]))
    fields += [(f"  {k}", _text(v)) for k, v in config.items() if k != "type"]  # fmt: skip
    echo_detail(fields, [("next fires", [str(f) for f in found.get("next_fires") or []])]
                if "next_fires" in found else [])  # fmt: skip


def _text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _switch(ctx: typer.Context, agent: str, trigger: str, on: bool, as_json: bool) -> None:
    with reporting_errors():
        changed = client_from(ctx).update_trigger(agent, trigger, {"enabled": on})
    done(as_json, f"{'enabled' if on else 'disabled'} {changed['id']} ({status_of(changed)})",
         changed)  # fmt: skip


@app.command()
def enable(
    ctx: typer.Context, agent: AgentArgument, trigger: TriggerArgument, as_json: JsonOption = False
) -> None:
    """Turn a trigger on (a stopped one too: its runs are then yours)."""
    _switch(ctx, agent, trigger, True, as_json)


@app.command()
def disable(
    ctx: typer.Context, agent: AgentArgument, trigger: TriggerArgument, as_json: JsonOption = False
) -> None:
    """Turn a trigger off: deliveries are refused and ticks skipped until it is enabled."""
    _switch(ctx, agent, trigger, False, as_json)


@app.command()
def delete(
    ctx: typer.Context, agent: AgentArgument, trigger: TriggerArgument, as_json: JsonOption = False
) -> None:
    """Delete a trigger (a webhook's URL stops working at once)."""
    with reporting_errors():
        client_from(ctx).delete_trigger(agent, trigger)
    done(as_json, f"deleted {trigger}", {"id": trigger, "deleted": True})


@app.command("rotate-secret")
def rotate_secret(
    ctx: typer.Context, agent: AgentArgument, trigger: TriggerArgument, as_json: JsonOption = False
) -> None:
    """Give a webhook a new secret, printed once; the old one stops working."""
    with reporting_errors():
        rotated = client_from(ctx).rotate_trigger_secret(agent, trigger)
    if as_json:
        echo_json(rotated)
        return
    typer.echo(f"rotated the secret of {rotated['id']}")
    _print_access(rotated)


@app.command()
def history(
    ctx: typer.Context,
    agent: AgentArgument,
    trigger: TriggerArgument,
    limit: Annotated[int, typer.Option("--limit", min=1, max=200, help="How many.")] = 50,
    before: Annotated[
        str | None, typer.Option("--before", help="Older than this event id (the next page).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Each delivery or tick, newest first: its run, or why it was refused."""
    with reporting_errors():
        found = client_from(ctx).trigger_history(agent, trigger, limit=limit, before=before)
    if as_json:
        echo_json(found)
    elif not found:
        typer.echo("Nothing yet.")
    else:
        rows = [[when(e.get("at")), e.get("kind") or "", e.get("status") or "",
                 e.get("run_id") or "-", e.get("key") or "", e.get("reason") or ""]
                for e in found]  # fmt: skip
        echo_table(["AT", "KIND", "STATUS", "RUN", "DELIVERY", "REASON"], rows)


@app.command()
def send(
    ctx: typer.Context,
    url: Annotated[str, typer.Argument(help="The webhook's URL (…/hooks/trigger.…).")],
    secret_env: Annotated[
        str,
        typer.Option(
            "--secret-env",
            metavar="VAR",
            help="The environment variable holding the secret (never on argv).",
        ),
    ],
    file: Annotated[
        Path, typer.Option("--file", "-f", help="The body to send, as is (- for stdin).")
    ],
    delivery: Annotated[
        str | None,
        typer.Option("--delivery", help="A delivery id: a retry with it gives the first run."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Sign a body with a webhook's secret and post it, as an outside system would."""
    with reporting_errors():
        secret = os.environ.get(secret_env, "")
        if not secret:
            raise DocumentError(f"${secret_env} is empty: export the webhook's secret in it.")
        body = _read_bytes(file)
        answer = _sender(ctx).send_delivery(url, secret, body, delivery=delivery)
    verb = "repeated: the first run is" if answer.get("repeated") else "started"
    done(as_json, f"{verb} {answer['run_id']}", answer)


def _read_bytes(path: Path) -> bytes:
    import sys

    try:
        return sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise DocumentError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _sender(ctx: typer.Context) -> Client:
    """The injected client (tests), else one without a token: a sender needs none."""
    from dhub.client import Client

    obj = ctx.find_root().obj
    if isinstance(obj, Client):
        return obj
    sender = Client("http://unused.invalid", "")
    ctx.find_root().call_on_close(sender.close)
    return sender
