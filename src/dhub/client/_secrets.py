"""The secrets half of ``Client`` (docs/secrets.md): values other resources use by reference
(``{"secret": "secret.…"}``) and nobody reads back. Nothing here returns a value: the
server never sends one; a secret comes back with ``has_value`` or ``from_env`` instead.

Where a method takes a secret it takes its id (``secret.…``) or its name, looked up among
the secrets the caller can see (several of that name: ``AmbiguousName``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dhub.client._names import is_id, pick
from dhub.client._paths import follow, query, segment

if TYPE_CHECKING:
    import httpx

    from dhub.client._models import Resource, ResourcePage

_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


class SecretsMixin:
    """Mixed into ``Client``, which supplies the transport."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

    def create_secret(self, doc: Mapping[str, Any]) -> Resource:
        """Store a secret: ``name``, ``description`` and its ``value`` (or, for admins,
        ``from_env``: a server environment variable ``DHUB_SECRET_…`` read when it is used).
        The answer says ``has_value``; the value itself is never sent back."""
        return self._object("POST", "/secrets", json=dict(doc))

    def get_secret(self, secret: str) -> Resource:
        """The secret's document (without its value: nobody reads that back)."""
        return self._object("GET", f"/secrets/{segment(self._secret_id(secret))}")

    def update_secret(self, secret: str, patch: Mapping[str, Any]) -> Resource:
        """Apply an RFC 7396 merge patch (a ``value`` in it rotates the secret)."""
        path = f"/secrets/{segment(self._secret_id(secret))}"
        return self._object("PATCH", path, json=dict(patch), headers=_MERGE_PATCH)

    def set_secret_value(self, secret: str, value: str) -> Resource:
        """Rotate: the secret's value becomes ``value`` (a new version, without the value)."""
        return self.update_secret(secret, {"value": value})

    def delete_secret(self, secret: str) -> None:
        """Delete the secret and its value."""
        self._request("DELETE", f"/secrets/{segment(self._secret_id(secret))}")

    def list_secrets(
        self,
        *,
        name: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ResourcePage:
        """One page of the secrets the caller can see, in creation order."""
        from dhub.client._models import ResourcePage

        params = query(name=name, q=q, limit=limit, cursor=cursor)
        body = self._object("GET", "/secrets", params=params)
        return ResourcePage(data=list(body.get("data") or []), next_cursor=body.get("next_cursor"))

    def iter_secrets(
        self, *, name: str | None = None, q: str | None = None, page_size: int | None = None
    ) -> Iterator[Resource]:
        """Every matching secret, fetching pages lazily."""
        return follow(
            lambda cursor: self.list_secrets(name=name, q=q, limit=page_size, cursor=cursor)
        )

    def _secret_id(self, secret: str) -> str:
        if is_id("secret", secret):
            return secret
        return str(pick("secret", secret, self.iter_secrets(name=secret))["id"])
