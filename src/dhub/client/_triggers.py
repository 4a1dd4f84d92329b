"""The triggers half of ``Client`` (docs/triggers.md): the webhooks and schedules that start an
event agent's runs, each delivery's or tick's history, and ``sign_delivery``, what a sender
computes to post to a webhook.

Where a method takes an agent it takes its id (``agent.…``) or its name (``resolve_agent``);
a trigger is named by its id (``trigger.…``). A trigger comes back as the server's JSON:
``type``, ``config`` (whatever its type holds: a webhook's ``mapping``, a schedule's ``cron``
or ``every``), ``status`` and ``stopped_reason``, ``runs_as``, a webhook's ``url`` (and, only
as it is made or rotated, its ``secret``), a schedule's ``next_fires`` when the server says.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dhub.client._paths import query, segment

if TYPE_CHECKING:
    import httpx

# The headers a webhook reads (dhub.domain.triggers spells them for the server; the SDK keeps
# its own copy so that a script posting deliveries needs nothing of the server's packages).
SIGNATURE_HEADER = "X-Dhub-Signature"
TIMESTAMP_HEADER = "X-Dhub-Timestamp"
DELIVERY_HEADER = "X-Dhub-Delivery"

_MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}

Trigger = dict[str, Any]


def sign_delivery(
    secret: str,
    body: bytes | str,
    *,
    delivery: str | None = None,
    timestamp: int | None = None,
) -> dict[str, str]:
    """The headers that make ``body`` a delivery a webhook accepts: ``X-Dhub-Timestamp`` (now,
    in Unix seconds, unless given), ``X-Dhub-Signature`` (``sha256=`` + the hex HMAC-SHA256,
    under ``secret``, of ``{timestamp}.{body}``) and, given ``delivery``, ``X-Dhub-Delivery``,
    which makes retries of the same delivery give its first run. Post exactly these bytes
    (the signature covers them), with ``Content-Type: application/json``."""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    stamp = str(int(time.time()) if timestamp is None else int(timestamp))
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + raw, hashlib.sha256)
    headers = {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: "sha256=" + mac.hexdigest(),
    }
    if delivery is not None:
        headers[DELIVERY_HEADER] = delivery
    return headers


class TriggersMixin:
    """Mixed into ``Client``, which supplies the transport and agent names."""

    if TYPE_CHECKING:

        def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]: ...

        def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

        def _agent_path(self, agent: str) -> str: ...

        _http: httpx.Client

    def list_triggers(self, agent: str) -> list[Trigger]:
        """The agent's triggers (for its editors), oldest first."""
        body = self._object("GET", f"{self._agent_path(agent)}/triggers")
        return list(body.get("data") or [])

    def create_trigger(self, agent: str, doc: Mapping[str, Any]) -> Trigger:
        """Make a trigger that starts the agent's runs as you: ``name``, ``description``,
        ``enabled`` and ``config`` (``{"type": "webhook", ...}`` or ``{"type": "schedule",
        ...}``). A webhook's answer carries its ``secret``: shown this once."""
        return self._object("POST", f"{self._agent_path(agent)}/triggers", json=dict(doc))

    def get_trigger(self, agent: str, trigger: str) -> Trigger:
        return self._object("GET", self._trigger_path(agent, trigger))

    def update_trigger(self, agent: str, trigger: str, patch: Mapping[str, Any]) -> Trigger:
        """Apply an RFC 7396 merge patch (``{"enabled": True}`` re-enables a stopped trigger,
        whose runs are then yours)."""
        path = self._trigger_path(agent, trigger)
        return self._object("PATCH", path, json=dict(patch), headers=_MERGE_PATCH)

    def delete_trigger(self, agent: str, trigger: str) -> None:
        self._request("DELETE", self._trigger_path(agent, trigger))

    def rotate_trigger_secret(self, agent: str, trigger: str) -> Trigger:
        """A new webhook secret, in the answer's ``secret`` (shown once); the old one stops
        working at once."""
        return self._object("POST", f"{self._trigger_path(agent, trigger)}/rotate-secret")

    def trigger_history(
        self, agent: str, trigger: str, *, limit: int | None = None, before: str | None = None
    ) -> list[dict[str, Any]]:
        """The trigger's deliveries or ticks, newest first (one page: ``limit``, and
        ``before`` an event id): each with its ``status``, ``run_id`` and ``reason``."""
        path = f"{self._trigger_path(agent, trigger)}/history"
        body = self._object("GET", path, params=query(limit=limit, before=before))
        return list(body.get("data") or [])

    def send_delivery(
        self, url: str, secret: str, body: bytes | str, *, delivery: str | None = None
    ) -> dict[str, Any]:
        """Post ``body`` to a webhook's ``url``, signed with its ``secret`` (``sign_delivery``)
        and without this client's token (the signature is the credential). The answer:
        ``run_id`` and ``url``, and ``repeated`` (True when ``delivery`` was seen before and
        the first run is the answer). A refused delivery raises as any call does
        (``Unauthenticated`` for a bad signature, ``InvalidInput`` for missing inputs)."""
        import httpx

        from dhub.client._exceptions import (
            DhubClientError,
            ServerUnreachable,
            error_from_response,
        )

        raw = body.encode() if isinstance(body, str) else bytes(body)
        headers = {"User-Agent": "dhub-client/0.1",
                   **sign_delivery(secret, raw, delivery=delivery)}  # fmt: skip
        try:
            response = self._http.post(url, content=raw, headers=headers)
        except httpx.TransportError as exc:
            raise ServerUnreachable(f"Could not reach {url}: {exc or type(exc).__name__}",
                                    url=url) from exc  # fmt: skip
        if response.is_error:
            raise error_from_response(response)
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or "run_id" not in answer:
            raise DhubClientError(
                f"{url} answered {response.status_code} without a run: is it a dhub webhook's "
                "URL (…/hooks/trigger.…)?"
            )
        return {**answer, "repeated": response.status_code == 200}

    def _trigger_path(self, agent: str, trigger: str) -> str:
        return f"{self._agent_path(agent)}/triggers/{segment(trigger)}"
