"""What every client-backed command shares: the client from the context, error reporting,
document files, and plain-text output."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import typer
import yaml

from dhub.client import (
    Agent,
    Client,
    DhubAPIError,
    DhubClientError,
    FieldError,
    NotFound,
    ServerUnreachable,
    Unauthenticated,
)


@dataclass
class Connection:
    """``ctx.obj`` when the caller did not inject a Client: built on first use, so commands
    that need no server (``serve``, ``--help``) never need a token."""

    url: str | None = None
    token: str | None = None
    client: Client | None = field(default=None, repr=False)


def client_from(ctx: typer.Context) -> Client:
    """The Client for this invocation: the one tests pass as ``obj=``, or one built from
    --url/--token and the environment (closed when the command ends)."""
    obj = ctx.find_root().obj
    if isinstance(obj, Client):
        return obj
    if not isinstance(obj, Connection):
        raise TypeError(f"ctx.obj must be a dhub Client or None, not {type(obj).__name__}")
    if obj.client is None:
        obj.client = Client.from_env(url=obj.url, token=obj.token)
        ctx.find_root().call_on_close(obj.client.close)
    return obj.client


def resolve_agent(api: Client, ref: str) -> Agent:
    """The agent ``ref`` stands for: its id (``agent.…``), else its name. A name used in
    several folders is ambiguous, and says which ids to choose from."""
    if ref.startswith("agent."):
        with suppress(NotFound):  # not an id after all: a name may start like one
            return api.get_agent(ref)
    # `q` is a substring search over name, alias and description: keep exact names only.
    named = [a for a in api.iter_agents(q=ref) if a.get("name") == ref]
    if len(named) == 1:
        return named[0]
    if not named:
        raise DhubClientError(
            f"No agent named or with id '{ref}' that you can see; `dhub agents list` shows "
            "the ones you can."
        )
    where = ", ".join(f"{a['id']} (folder {a.get('folder_id') or '-'})" for a in named)
    raise DhubClientError(f"{len(named)} agents are named '{ref}': {where}; give its id.")


class DocumentError(Exception):
    """The --file argument could not be read as one agent document."""


@contextmanager
def reporting_errors() -> Iterator[None]:
    """Turn client errors into a message on stderr and exit status 1 (never a traceback);
    an unusable input file exits 2, like other usage errors."""
    try:
        yield
    except DocumentError as exc:
        _fail([f"Error: {exc}"], status=2)
    except DhubClientError as exc:
        _fail(error_lines(exc))


def error_lines(exc: DhubClientError) -> list[str]:
    """What to tell a person about a client error: the message, and what to do about it."""
    if isinstance(exc, DhubAPIError):
        return _api_error_lines(exc)
    if isinstance(exc, ServerUnreachable):
        return [f"Error: {exc}", "Is `dhub serve` running? Set DHUB_URL or --url to point at it."]
    return [f"Error: {exc}"]


def _api_error_lines(exc: DhubAPIError) -> list[str]:
    lines = [f"Error: {exc.detail} (HTTP {exc.status_code})"]
    lines.extend(f"  {error_line(e)}" for e in exc.errors)
    if isinstance(exc, Unauthenticated):
        lines.append("Set DHUB_TOKEN or --token to a valid API token.")
    return lines


def _fail(lines: Sequence[str], status: int = 1) -> NoReturn:
    for line in lines:
        typer.echo(line, err=True)
    raise typer.Exit(status)


def error_line(error: FieldError) -> str:
    # An empty pointer is the document itself; say so rather than print ": message".
    return f"{error.loc or '(document)'}: {error.message}"


# -- documents ---------------------------------------------------------------------------------


class _DocumentLoader(yaml.SafeLoader):
    """SafeLoader without timestamps: agent documents are JSON data, so a date-like string
    (say a tag ``2024-05-01``) must stay a string instead of becoming an unsendable datetime."""


_DocumentLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_document(path: Path) -> dict[str, Any]:
    """Read one agent document from a JSON or YAML file (``-`` reads stdin)."""
    text = _read(path)
    try:
        doc = _parse(text, path.suffix.lower())
    except (ValueError, yaml.YAMLError) as exc:
        raise _bad_file(f"{path} is not valid JSON or YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise _bad_file(f"{path} must hold one object (an agent document), not {_kind(doc)}.")
    return doc


def _read(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad_file(f"cannot read {path}: {exc}") from exc


def _parse(text: str, suffix: str) -> Any:
    if suffix == ".json":
        return json.loads(text)
    if suffix in (".yaml", ".yml"):
        return yaml.load(text, Loader=_DocumentLoader)
    try:  # unknown suffix or stdin: JSON first, for its precise errors, then YAML
        return json.loads(text)
    except ValueError:
        return yaml.load(text, Loader=_DocumentLoader)


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"


def _bad_file(message: str) -> DocumentError:
    # Not typer.BadParameter: typer would draw it in a rich box that wraps the message.
    return DocumentError(message)


# -- output ------------------------------------------------------------------------------------


def echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns two spaces apart, like `kubectl get`: plain text that pipes well."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def when(unix_ms: int | None, missing: str = "-") -> str:
    """A server timestamp (unix ms) as UTC, to the second."""
    if unix_ms is None:
        return missing
    return datetime.fromtimestamp(unix_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def echo_detail(fields: Sequence[tuple[str, str]], lists: Sequence[tuple[str, list[str]]]) -> None:
    """One object as ``key: value`` lines, then each list under its heading (or ``(none)``)."""
    width = max(len(k) for k, _ in [*fields, *((k, "") for k, _ in lists)]) + 1
    for key, value in fields:
        typer.echo(f"{key + ':':<{width}} {value}".rstrip())
    for key, items in lists:
        typer.echo(f"{key + ':':<{width}} {', '.join(items) if items else '(none)'}")
