"""What every client-backed command shares: the client from the context, names for ids,
error reporting, document files, and output (tables for people, ``--json`` for scripts).

Cheap to import on purpose: ``dhub --help`` imports every command module, so the SDK (httpx),
YAML and the server's packages are imported only by the functions that use them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer

if TYPE_CHECKING:
    import yaml

    from dhub.client import Agent, Client, DhubAPIError, DhubClientError, FieldError

# The SDK's RunStatus and ShareScope, spelled out so that typer can read the commands'
# signatures without importing the SDK (tests/unit/test_cli_startup.py checks they match).
RunStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled"]
ShareScope = Literal["viewer", "runner", "editor"]

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON for scripts (the API's objects) instead.")
]
AgentArgument = Annotated[
    str, typer.Argument(metavar="AGENT", help="The agent's name or id (agent.…).")
]


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
    from dhub.client import Client

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
    """The agent ``ref`` stands for: an id (``agent.<ulid>``) or else an exact name among the
    agents the caller can see (``Client.resolve_agent``; the errors say what to do)."""
    return api.resolve_agent(ref)


def agent_names(api: Client, agent_ids: Iterable[str]) -> dict[str, str]:
    """The name of each agent, for tables; an agent the caller can no longer see keeps
    its id."""
    from dhub.client import NotFound

    names: dict[str, str] = {}
    for agent_id in dict.fromkeys(agent_ids):
        try:
            names[agent_id] = str(api.get_agent(agent_id).get("name") or agent_id)
        except NotFound:
            names[agent_id] = agent_id
    return names


def labelled(agent: Agent) -> str:
    """``name (id)``: how messages name an agent."""
    return f"{agent.get('name')} ({agent['id']})"


class DocumentError(Exception):
    """The --file argument could not be read as one agent document."""


@contextmanager
def reporting_errors() -> Iterator[None]:
    """Turn client errors into a message on stderr and exit status 1 (never a traceback);
    an unusable input file exits 2, like other usage errors."""
    try:
        yield
    except DocumentError as exc:
        fail([f"Error: {exc}"], status=2)
    except Exception as exc:
        from dhub.client import DhubClientError

        if not isinstance(exc, DhubClientError):
            raise
        fail(error_lines(exc))


def error_lines(exc: DhubClientError) -> list[str]:
    """What to tell a person about a client error: the message, and what to do about it."""
    from dhub.client import AmbiguousName, DhubAPIError, ServerUnreachable, UnknownName

    if isinstance(exc, UnknownName):
        return [
            f"Error: no {exc.category} named '{exc.name}' that you can see.",
            f"`dhub {exc.category}s list` shows the ones you can.",
        ]
    if isinstance(exc, AmbiguousName):
        lines = [f"Error: {len(exc.matches)} {exc.category}s you can see are named '{exc.name}':"]
        lines += [f"  {m.get('id')}  {_folder(m)}" for m in exc.matches]
        return [*lines, "Give the id of the one you mean."]
    if isinstance(exc, DhubAPIError):
        return _api_error_lines(exc)
    if isinstance(exc, ServerUnreachable):
        return [f"Error: {exc}", "Is `dhub serve` running? Set DHUB_URL or --url to point at it."]
    return [f"Error: {exc}"]


def _folder(resource: dict[str, Any]) -> str:
    folder = resource.get("folder_id")
    return f"in folder {folder}" if folder else "at the top level (no folder)"


def _api_error_lines(exc: DhubAPIError) -> list[str]:
    from dhub.client import Unauthenticated

    lines = [f"Error: {exc.detail} (HTTP {exc.status_code})"]
    lines.extend(f"  {error_line(e)}" for e in exc.errors)
    if isinstance(exc, Unauthenticated):
        lines.append("Set DHUB_TOKEN or --token to a valid API token.")
    return lines


def fail(lines: Sequence[str], status: int = 1) -> NoReturn:
    """Print ``lines`` on stderr and exit with ``status``."""
    for line in lines:
        typer.echo(line, err=True)
    raise typer.Exit(status)


def error_line(error: FieldError) -> str:
    # An empty pointer is the document itself; say so rather than print ": message".
    return f"{error.loc or '(document)'}: {error.message}"


# -- documents ---------------------------------------------------------------------------------


@cache
def _document_loader() -> type[yaml.SafeLoader]:
    """SafeLoader without timestamps: agent documents are JSON data, so a date-like string
    (say a tag ``2024-05-01``) must stay a string instead of becoming an unsendable datetime."""
    import yaml

    class DocumentLoader(yaml.SafeLoader):
        pass

    DocumentLoader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return DocumentLoader


def load_document(path: Path) -> dict[str, Any]:
    """Read one agent document from a JSON or YAML file (``-`` reads stdin)."""
    import yaml

    text = _read(path)
    try:
        doc = _parse(text, path.suffix.lower())
    except (ValueError, yaml.YAMLError) as exc:
        raise _bad_file(f"{path} is not valid JSON or YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise _bad_file(f"{path} must hold one object (an agent document), not {_kind(doc)}.")
    return doc


def load_patch(path: Path) -> dict[str, Any]:
    """A document from a file as a merge patch (``without_envelope``)."""
    return without_envelope(load_document(path))


def without_envelope(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without the envelope the server keeps (id, version, owners, markings, ...): what
    ``get --json`` printed can be edited and given back as a patch (only the sharing commands
    change owners and markings)."""
    from dhub.client._apply import READ_ONLY_FIELDS

    return {k: v for k, v in doc.items() if k not in READ_ONLY_FIELDS}


def _read(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad_file(f"cannot read {path}: {exc}") from exc


def _parse(text: str, suffix: str) -> Any:
    import yaml

    if suffix == ".json":
        return json.loads(text)
    if suffix in (".yaml", ".yml"):
        return yaml.load(text, Loader=_document_loader())
    try:  # unknown suffix or stdin: JSON first, for its precise errors, then YAML
        return json.loads(text)
    except ValueError:
        return yaml.load(text, Loader=_document_loader())


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"


def _bad_file(message: str) -> DocumentError:
    # Not typer.BadParameter: typer would draw it in a rich box that wraps the message.
    return DocumentError(message)


# -- output ------------------------------------------------------------------------------------


def echo_json(value: Any) -> None:
    """``value`` as indented JSON on stdout: what ``--json`` prints."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def done(as_json: bool, message: str, value: Any) -> None:
    """What a command that changed something prints: ``message`` for people, else ``value``
    (the object the API returned, or for a call that returns nothing a small object saying
    what was done)."""
    if as_json:
        echo_json(value)
    else:
        typer.echo(message)


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns two spaces apart, like `kubectl get`: plain text that pipes well.
    Widths count terminal cells, so wide characters (CJK names) keep the columns aligned."""
    from rich.cells import cell_len

    widths = [max([cell_len(h), *(cell_len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        cells = (c + " " * (w - cell_len(c)) for c, w in zip(row, widths, strict=True))
        typer.echo("  ".join(cells).rstrip())


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
