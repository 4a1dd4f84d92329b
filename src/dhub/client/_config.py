"""Where the client finds its server and token when the caller does not say."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dhub.client._exceptions import ConfigurationError

DEFAULT_URL = "http://127.0.0.1:8000"
TOKEN_FILE = "admin.token"


def resolve_url(url: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return (url or env.get("DHUB_URL") or DEFAULT_URL).rstrip("/")


def resolve_token(
    token: str | None = None,
    data_dir: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The explicit token, else ``$DHUB_TOKEN``, else the admin token ``dhub serve`` wrote into
    the local data directory (``$DHUB_DATA_DIR`` or ``./.dhub``, as the server resolves it)."""
    env = os.environ if environ is None else environ
    found = token or env.get("DHUB_TOKEN")
    if found:
        return found
    directory = Path(data_dir or env.get("DHUB_DATA_DIR") or ".dhub")
    path = directory / TOKEN_FILE
    try:
        found = path.read_text().strip()
    except OSError:
        found = ""
    if not found:
        raise ConfigurationError(
            f"No API token: set DHUB_TOKEN, or run `dhub serve` once so that {path} exists "
            "(or point DHUB_DATA_DIR at the server's data directory)."
        )
    return found
