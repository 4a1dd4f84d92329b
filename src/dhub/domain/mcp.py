"""MCP servers as stored resources (issue 20, docs/mcp.md "Using MCP servers' tools").

An **MCP server** (``/api/v1/mcp-servers``) says how to reach a server of the Model Context
Protocol: ``streamable_http`` (a URL, with headers) or ``stdio`` (a program dhub starts in the
sandbox, under its limits and network policy: a ``command`` with ``args``, or a Python
``source`` of its own, with ``dependencies`` installed as a function's are). Values that are
secrets (an API key in a header, a token in the environment) are written as ``{"secret":
"secret.…"}``: a reference to a stored secret, revealed only when dhub connects, never
returned. ``allowed_tools`` narrows what any agent may be given.

An agent lists one among its ``tools``: by id (all its tools), or as ``{"id", "tools":
[names], "prefix"}`` (named ones, optionally renamed for the model). A workflow's
``tool_call`` node calls one tool: ``{"id", "tools": [name]}``. Each becomes a
``KnowledgeTool`` (domain/knowledge.py) the runtime performs for the run's user, with the
MCP tool's own input schema: the engine needs nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from dhub.domain.base import PositiveSeconds, SpecModel
from dhub.domain.errors import FieldError
from dhub.domain.knowledge import TOOL_NAME, KnowledgeTool

CATEGORY = "mcp_server"
OPERATION = "mcp.call"
# The bound argument naming what to call: merged over the model's arguments (domain/knowledge.py),
# and taken out again before the call, so a tool's own parameters are never touched.
BOUND = "$mcp"
MAX_TOOL_NAME = 64  # what model providers accept (TOOL_NAME)
_HEADER = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Headers the transport owns: a document setting them would break or redirect the protocol.
_TRANSPORT_HEADERS = frozenset(
    {"host", "content-length", "content-type", "accept", "mcp-session-id",
     "mcp-protocol-version", "connection", "transfer-encoding"}
)  # fmt: skip


class SecretRef(SpecModel):
    """A secret's value, by reference: resolved when dhub connects, never stored here."""

    secret: str = Field(description="The id of a stored secret (secret.…).")


Value = Annotated[str, Field(max_length=8192)] | SecretRef


class McpServerBody(SpecModel):
    """What an MCP server document says beyond the envelope (McpServerSpec adds it)."""

    transport: Literal["stdio", "streamable_http"] = Field(
        description="How dhub talks to it: 'streamable_http' (url) or 'stdio' (a program "
        "dhub starts in the sandbox)."
    )
    url: str | None = Field(default=None, description="streamable_http: the endpoint URL.")
    headers: dict[str, Value] = Field(
        default={}, description="streamable_http: headers sent with every request."
    )
    command: str | None = Field(
        default=None,
        description="stdio: the program ('python' is the sandbox's Python, with the "
        "dependencies); without it, 'source' runs.",
    )
    args: list[Annotated[str, Field(max_length=4096)]] = Field(
        default=[], description="stdio: the program's arguments."
    )
    env: dict[str, Value] = Field(default={}, description="stdio: environment variables.")
    source: str | None = Field(
        default=None,
        description="stdio: a Python program that serves MCP on stdin/stdout (run when no "
        "command is given, or as /sandbox/server.py).",
    )
    dependencies: list[str] = Field(
        default=[], description="stdio: pip requirements installed into its sandbox."
    )
    network: bool = Field(
        default=False, description="stdio: whether the server may reach the network."
    )
    allowed_tools: list[str] | None = Field(
        default=None, description="The tools agents may be given (null: all it lists)."
    )
    timeout: PositiveSeconds = Field(default=60, description="Seconds a call may take.")


def body_problems(body: Mapping[str, Any]) -> list[FieldError]:
    """What the schema cannot say: each transport's own fields, URLs, names."""
    errors: list[FieldError] = []
    transport = body.get("transport")
    http_only = ("url", "headers")
    stdio_only = ("command", "args", "env", "source", "dependencies", "network")
    if transport == "streamable_http":
        errors += _misplaced(body, stdio_only, "stdio")
        errors += _url_problems(body.get("url"))
    elif transport == "stdio":
        errors += _misplaced(body, http_only, "streamable_http")
        if not body.get("command") and not body.get("source"):
            errors.append(
                FieldError(
                    "/command",
                    "A stdio server needs a 'command' to run (e.g. 'python' with args "
                    "['-m', 'some_server'] and the package in 'dependencies'), or a Python "
                    "'source' that serves MCP on stdin/stdout.",
                    "required",
                )
            )
    for name in _names(body.get("headers")):
        if not _HEADER.fullmatch(name):
            errors.append(FieldError(f"/headers/{name}", "Not a valid header name.", "value"))
        elif name.lower() in _TRANSPORT_HEADERS:
            message = f"dhub's MCP transport sets '{name}' itself: remove it."
            errors.append(FieldError(f"/headers/{name}", message, "read_only"))
    for name in _names(body.get("env")):
        if not _ENV_NAME.fullmatch(name):
            message = "An environment variable's name: letters, digits and '_', not first a digit."
            errors.append(FieldError(f"/env/{name}", message, "value"))
    return errors


def _names(value: Any) -> list[str]:
    return [k for k in value if isinstance(k, str)] if isinstance(value, dict) else []


def _misplaced(body: Mapping[str, Any], fields: Sequence[str], other: str) -> list[FieldError]:
    return [
        FieldError(
            f"/{name}",
            f"'{name}' is for {other} servers: remove it, or set transport to '{other}'.",
            "not_allowed",
        )
        for name in fields
        if body.get(name) not in (None, [], {}, False)
    ]


def _url_problems(url: Any) -> list[FieldError]:
    if not isinstance(url, str) or not url:
        message = "A streamable_http server needs its 'url' (https://host/mcp)."
        return [FieldError("/url", message, "required")]
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        message = "The url must be an http:// or https:// address with a host."
        return [FieldError("/url", message, "value")]
    if parts.username or parts.password:
        message = (
            "Put credentials in a header with a secret ({'Authorization': {'secret': "
            "'secret.…'}}), not in the url: urls are shown to everyone who can read it."
        )
        return [FieldError("/url", message, "value")]
    return []


# -- in agents ----------------------------------------------------------------------------------


class McpToolsUse(SpecModel):
    """The object form of an MCP server in an agent's tools (or a tool_call node's tool)."""

    id: str = Field(description="The MCP server's id (mcp_server.…).")
    name: str | None = Field(default=None, description="For display only, as in {id, name}.")
    tools: list[str] | None = Field(
        default=None,
        description="The tools the agent gets (null: all the server allows); a tool_call node "
        "names exactly one.",
    )
    prefix: str = Field(
        default="",
        max_length=32,
        description="Put before each tool's name for the model (two servers' 'search').",
    )


def is_mcp_id(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(f"{CATEGORY}.")


def model_name(prefix: str, tool: str) -> str:
    """The name the model calls an MCP tool by: ``prefix + tool`` with what providers refuse
    replaced by '_' (MCP allows '.' and '/'), cut to their 64 characters."""
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", prefix + tool)
    return name[:MAX_TOOL_NAME] or "_"


def mcp_tool(
    server_id: str, tool: str, description: str, schema: Mapping[str, Any], prefix: str = ""
) -> KnowledgeTool:
    """What an MCP tool becomes for an agent: performed by the runtime (``OPERATION``) with
    the server and tool bound, so a model can reach nothing but what the agent lists."""
    parameters = dict(schema) if schema.get("type") == "object" else {"type": "object"}
    name = model_name(prefix, tool)
    assert TOOL_NAME.fullmatch(name)
    bound = {BOUND: {"server": server_id, "tool": tool}}
    return KnowledgeTool(name, description, parameters, OPERATION, bound)


def split_arguments(arguments: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """The server id, tool name and the tool's own arguments of an ``OPERATION`` call."""
    target = arguments.get(BOUND)
    if not isinstance(target, dict):
        return None
    server, tool = target.get("server"), target.get("tool")
    if not isinstance(server, str) or not isinstance(tool, str):
        return None
    return server, tool, {k: v for k, v in arguments.items() if k != BOUND}
