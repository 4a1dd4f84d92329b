"""Secrets (docs/secrets.md): values that other resources use by reference and nobody reads
back. A secret is a resource like the others (services/resources.py stores its document,
owners, grants, markings and versions); this module keeps its value out of all of that.

- The value is write-only. It is taken out of the document before anything is stored,
  encrypted with the server's key (services/secret_vault.py) into ``secret_values``, and
  deleted with the secret. Documents, versions, lists, audit entries and errors never hold it:
  a secret's document says ``has_value`` (and ``value_updated_at``) instead, or names the
  server environment variable (``from_env``, ``DHUB_SECRET_…``) that holds it.
- Only admins may point a secret at the server's environment: whoever sets ``from_env``
  chooses which of the server's variables flows into what users run.
- ``reveal`` (and ``reveal_in``, which answers None rather than raising) is the one way to
  the value, for the server's own use (an MCP server's headers):
  through the one reference check (``Reach.use(secret_id, "secret")``: run scope, every
  marking held), with the one ``unreachable`` message, word for word, for an id that names
  nothing, something unshared, something marked or something the user may only read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from dhub.access.principal import Principal
from dhub.domain.errors import FieldError, Forbidden, InvalidInput, NotFound
from dhub.domain.resources import SECRET_SERVER_FIELDS, SecretSpec, unreachable
from dhub.domain.secrets import env_name_problem, secret_ids, secret_ref
from dhub.services.references import Reach
from dhub.services.secret_vault import SecretKeyError, SecretProblem, SecretVault
from dhub.store import resources as repo
from dhub.store import secrets as values
from dhub.store.db import Conn, Database

__all__ = [
    "SecretKeyError",
    "SecretProblem",
    "SecretUnavailable",
    "SecretVault",
    "UnreachableSecret",
    "install",
    "reveal",
    "reveal_in",
    "secret_ids",
    "secret_ref",
]


# The vaults this process opened (services/runtime.py ``open_runtime`` installs its own): a
# server has one; a test process that starts several servers has several, and a value is
# decrypted with whichever key made it (each ciphertext names its secret either way). What
# reveals a value for a caller that holds no vault (an MCP server's connection) uses these.
_VAULTS: list[SecretVault] = []


def install(vault: SecretVault) -> None:
    """Let ``reveal`` and ``reveal_in`` decrypt with ``vault`` (the newest is tried first)."""
    if vault not in _VAULTS:
        _VAULTS.insert(0, vault)


class UnreachableSecret(NotFound):
    """The principal may not use this secret, or there is none: ``unreachable("secret", id)``,
    the same words whatever the reason."""

    def __init__(self, secret_id: str) -> None:
        super().__init__(unreachable("secret", secret_id))
        self.secret_id = secret_id


class SecretUnavailable(SecretProblem):
    """A secret the principal may use has no value on this server: its environment variable
    is not set, or no value was stored. Said only to those who may use it."""

    status_code = 409


# -- storing ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pending:
    """What a create or patch does to the stored value, once the document is stored."""

    value: str | None = field(default=None, repr=False)  # a new value to encrypt and store
    drop: bool = False  # the stored value goes (the secret now reads the environment)


def editable(document: dict[str, Any]) -> dict[str, Any]:
    """A stored secret document without the server's fields, for a merge patch to apply to
    (a patch that names them is refused, as on create)."""
    return {k: v for k, v in document.items() if k not in SECRET_SERVER_FIELDS}


def _admin_only(principal: Principal) -> None:
    if not principal.is_admin:
        raise Forbidden(
            "'from_env' reads the server's environment: only an admin may set or change it. "
            "Give the secret a 'value' instead, or ask an admin."
        )


def problems_for(principal: Principal, spec: SecretSpec) -> list[FieldError]:
    """What ``validate`` says of a new secret beyond its schema: a value or a variable, and
    ``from_env`` for admins only."""
    errors = []
    if spec.value is None and spec.from_env is None:
        errors.append(_missing_value())
    if spec.from_env is not None and not principal.is_admin:
        message = (
            "Only an admin may set 'from_env' (it reads the server's environment): give the "
            "secret a 'value' instead, or ask an admin."
        )
        errors.append(FieldError("/from_env", message, "admin_only"))
    return errors


def _missing_value() -> FieldError:
    return FieldError(
        "/value",
        "A secret needs its 'value' (or, set by an admin, 'from_env': the server "
        "environment variable that holds it): add one.",
        "missing",
    )


def on_create(principal: Principal, spec: SecretSpec, now: int) -> tuple[SecretSpec, Pending]:
    """The document to store for a new secret (without its value), and what to store beside
    it. Forbidden for a non-admin's ``from_env``; InvalidInput without a value."""
    if spec.from_env is not None:
        _admin_only(principal)
        return _stored(spec, has_value=False, at=None), Pending()
    if spec.value is None:
        raise InvalidInput([_missing_value()])
    return _stored(spec, has_value=True, at=now), Pending(value=spec.value)


def on_patch(
    principal: Principal, current: dict[str, Any], spec: SecretSpec, now: int
) -> tuple[SecretSpec, Pending]:
    """The next document of a patched secret (``current`` is the stored one) and what to do
    to its value: a new ``value`` rotates it; a ``from_env`` (admins) replaces it; neither
    keeps what is there. Clearing ``from_env`` needs a value in the same patch."""
    had_value = bool(current.get("has_value"))
    if spec.from_env is not None:
        if spec.from_env != current.get("from_env"):
            _admin_only(principal)
        return _stored(spec, has_value=False, at=None), Pending(drop=had_value)
    if spec.value is not None:
        return _stored(spec, has_value=True, at=now), Pending(value=spec.value)
    if not had_value:
        raise InvalidInput([_missing_value()])
    return _stored(spec, has_value=True, at=current.get("value_updated_at")), Pending()


def _stored(spec: SecretSpec, *, has_value: bool, at: int | None) -> SecretSpec:
    return spec.model_copy(update={"value": None, "has_value": has_value, "value_updated_at": at})


async def apply(
    conn: Conn,
    vault: SecretVault | None,
    secret_id: str,
    pending: Pending,
    user_id: str,
    now: int,
) -> None:
    """Store (encrypted) or drop the value, in the transaction that stored the document."""
    if pending.value is not None:
        vault = vault or (_VAULTS[0] if _VAULTS else None)
        if vault is None:
            raise RuntimeError("no SecretVault is open: open_runtime opens the server's")
        await values.put(conn, secret_id, vault.seal(secret_id, pending.value), user_id, now)
    elif pending.drop:
        await values.drop(conn, secret_id)


async def deleted(conn: Conn, category: str, secret_id: str) -> None:
    if category == "secret":
        await values.drop(conn, secret_id)


# -- using --------------------------------------------------------------------------------------


def _unseal(vault: SecretVault | None, secret_id: str, ciphertext: str) -> str:
    vaults = [vault] if vault is not None else _VAULTS
    for candidate in vaults[:-1]:
        try:
            return candidate.unseal(secret_id, ciphertext)
        except SecretKeyError:
            continue
    if not vaults:
        raise SecretKeyError(f"No key is open to decrypt '{secret_id}' (open_runtime opens one).")
    return vaults[-1].unseal(secret_id, ciphertext)


async def reveal(
    db_or_conn: Database | Conn,
    principal: Principal,
    secret_id: str,
    vault: SecretVault | None = None,
) -> str:
    """The value of ``secret_id`` for ``principal`` to use (put into an MCP server's headers
    or environment), never to show. Through the one reference check: UnreachableSecret,
    with the standard message, unless ``principal`` may run the secret and holds every
    marking on it (and its folders); SecretUnavailable when a usable secret has no value on
    this server; SecretKeyError when this server's key cannot decrypt it. ``vault``: the
    server's (``Runtime.vault``); None, the ones this process opened."""
    if isinstance(db_or_conn, Database):
        async with db_or_conn.read(snapshot=True) as conn:
            found = await _reveal(conn, principal, secret_id, vault)
    else:
        found = await _reveal(db_or_conn, principal, secret_id, vault)
    if found is None:
        raise UnreachableSecret(secret_id)
    return found


async def reveal_in(
    conn: Conn, principal: Principal, secret_id: str, vault: SecretVault | None = None
) -> str | None:
    """As ``reveal`` in the caller's transaction, but None (not UnreachableSecret) when
    ``principal`` may not use the secret, whatever the reason: for a caller that tries
    several principals (an MCP server's owners) and says itself what failed. SecretUnavailable
    and SecretKeyError (both ``SecretProblem``) still say what is wrong with a usable one."""
    return await _reveal(conn, principal, secret_id, vault)


async def _reveal(
    conn: Conn, principal: Principal, secret_id: str, vault: SecretVault | None
) -> str | None:
    row = await Reach(conn, principal).use(secret_id, "secret")
    if not isinstance(row, repo.ResourceRow):
        return None
    document = orjson.loads(row.record.document)
    variable = document.get("from_env")
    if isinstance(variable, str):
        found = os.environ.get(variable) if env_name_problem(variable) is None else None
        if not found:
            raise SecretUnavailable(
                f"The secret '{secret_id}' takes its value from the server environment "
                f"variable {variable}, which is not set on this server: ask an admin to set it "
                "(on every process that runs agents) and restart."
            )
        return found
    ciphertext = await values.get(conn, secret_id)
    if ciphertext is None:
        raise SecretUnavailable(
            f"The secret '{secret_id}' has no value: set one (`dhub secrets set-value "
            f"{secret_id}`)."
        )
    return _unseal(vault, secret_id, ciphertext)
