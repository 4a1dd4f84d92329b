"""Secrets, in pure terms (docs/secrets.md): how a document refers to one, and the rules for
a secret whose value comes from the server's environment.

A value in another resource's document (an MCP server's header, a stdio server's environment
variable) may be written ``{"secret": "secret.<id>"}``: the server puts the secret's value
there when it uses the document, after the one reference check (services/references.py), and
never shows it. ``secret_ids`` finds every such reference in a document.
"""

from __future__ import annotations

import re
from typing import Any

# A secret may take its value from a server environment variable only when the variable's
# name says it is meant for that: the rest of the server's environment (database URL, model
# keys, DHUB_SECRET_KEY itself) stays out of reach of anyone who can create a secret.
ENV_PREFIX = "DHUB_SECRET_"
ENV_NAME = re.compile(rf"{ENV_PREFIX}[A-Z0-9_]+")
KEY_VARIABLE = "DHUB_SECRET_KEY"  # the key that encrypts stored values: never a secret's source
MAX_VALUE = 65_536  # characters: a PEM key or a service account's JSON fits

SECRET_ID = re.compile(r"secret\.[0-9A-Za-z_-]{1,56}")


def env_name_problem(name: str) -> str | None:
    """Why ``name`` may not be a secret's ``from_env``, or None when it may."""
    if ENV_NAME.fullmatch(name) is None or name == KEY_VARIABLE:
        return (
            f"'from_env' must name a server environment variable whose name starts with "
            f"{ENV_PREFIX} (capital letters, digits and '_', e.g. {ENV_PREFIX}GITHUB_TOKEN), "
            f"other than {KEY_VARIABLE}: set one on the server and name it here."
        )
    return None


def secret_ref(value: Any) -> str | None:
    """The secret id when ``value`` is a reference ``{"secret": "secret.<id>"}`` (exactly that
    one key), else None. The id is returned as written: the reference check decides whether
    it names anything the user may use."""
    if isinstance(value, dict) and len(value) == 1:
        ref = value.get("secret")
        if isinstance(ref, str):
            return ref
    return None


Path = tuple[str | int, ...]


def secret_refs(value: Any, at: Path = ()) -> list[tuple[Path, str]]:
    """Where each ``{"secret": "secret.<id>"}`` in ``value`` is (the path to the object) and
    the id it names, at any depth, in document order."""
    ref = secret_ref(value)
    if ref is not None:
        return [(at, ref)]
    found: list[tuple[Path, str]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += secret_refs(item, (*at, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += secret_refs(item, (*at, i))
    return found


def secret_ids(value: Any) -> list[str]:
    """Every secret a document refers to with ``{"secret": "secret.<id>"}``, at any depth, in
    document order, each once."""
    return list(dict.fromkeys(ref for _, ref in secret_refs(value)))
