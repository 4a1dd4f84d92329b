"""Triggers (issue 21, docs/triggers.md): what starts an event agent from outside.

A **webhook** trigger has a public URL (``POST /hooks/{trigger_id}``) and a secret shown once;
a delivery is accepted when ``X-Dhub-Signature`` is ``sha256=`` + the hex HMAC-SHA256, under
the secret, of ``{X-Dhub-Timestamp}.{body}``, with a timestamp within ``TOLERANCE_SECONDS`` of
now (a replayed delivery is refused once stale), from an allowed source when a list is given.
``X-Dhub-Delivery`` names the delivery: a retry of it gives the run the first one started.
An optional ``mapping`` (expressions over ``body`` and ``headers``) gives the start variables;
without one the body is the inputs.

A **schedule** trigger starts a run at each tick of a five-field ``cron`` in a ``timezone``
(or ``every`` so many seconds) with fixed ``inputs``; ticks missed while no server ran are
skipped or run once (``missed``).

Everything here is pure: the signature arithmetic and the documents' shapes.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from dhub.domain.base import JsonObject, SpecModel
from dhub.domain.schedules import CronRule, EveryRule, Rule, cron_problem

SIGNATURE_HEADER = "X-Dhub-Signature"
TIMESTAMP_HEADER = "X-Dhub-Timestamp"
DELIVERY_HEADER = "X-Dhub-Delivery"
TOLERANCE_SECONDS = 300  # how old (or how far ahead) a delivery's timestamp may be
MAX_BODY_BYTES = 1 << 20  # a delivery's body
MAX_DELIVERY_ID = 100


class WebhookConfig(SpecModel):
    type: Literal["webhook"]
    mapping: dict[str, Any] | None = Field(
        default=None,
        description="Start variable -> value: a literal, or an expression over 'body' and "
        "'headers' ('{{ body.issue.title }}'). Null: the body is the inputs.",
    )
    allowed_sources: list[str] | None = Field(
        default=None,
        description="Addresses or networks (CIDR) deliveries may come from; null: anywhere.",
    )

    @field_validator("allowed_sources")
    @classmethod
    def _networks(cls, value: list[str] | None) -> list[str] | None:
        for text in value or ():
            try:
                ipaddress.ip_network(text, strict=False)
            except ValueError as exc:
                raise ValueError(f"'{text}' is not an address or a network (CIDR)") from exc
        return value


class ScheduleConfig(SpecModel):
    type: Literal["schedule"]
    cron: str | None = Field(default=None, description="Five fields: '0 9 * * 1-5'.")
    every: Annotated[int, Field(ge=60, le=366 * 86400)] | None = Field(
        default=None, description="Seconds between ticks (instead of cron), at least 60."
    )
    timezone: str = Field(default="UTC", description="The IANA zone the cron reads in.")
    inputs: JsonObject = Field(default={}, description="The start variables of every run.")
    missed: Literal["skip", "run_once"] = Field(
        default="skip",
        description="Ticks missed while no server ran: skip them, or run once for them all.",
    )

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        problem = None if value is None else cron_problem(value)
        if problem is not None:
            raise ValueError(f"'{value}' {problem}")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"'{value}' is no IANA time zone (e.g. 'Asia/Seoul', 'UTC')") from exc
        return value

    @model_validator(mode="after")
    def _one_rule(self) -> ScheduleConfig:
        if (self.cron is None) == (self.every is None):
            raise ValueError("a schedule has either 'cron' or 'every' (seconds), not both")
        return self

    def rule(self, created_at: int) -> Rule:
        """Its ticks' rule; ``every`` counts from the creation, in whole seconds."""
        if self.cron is not None:
            return CronRule(self.cron, self.timezone)
        assert self.every is not None
        return EveryRule(self.every, created_at // 1000 * 1000)


TriggerConfig = Annotated[WebhookConfig | ScheduleConfig, Field(discriminator="type")]


class TriggerSpec(SpecModel):
    """What a user writes: a name, whether it is on, and its type's config."""

    name: Annotated[str, Field(min_length=1, max_length=200)] = "trigger"
    description: str = ""
    enabled: bool = True
    config: TriggerConfig


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Dhub-Signature`` of a delivery: what its sender computes too."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signature_problem(
    secret: str, headers: dict[str, str], body: bytes, now_seconds: float
) -> str | None:
    """Why a delivery's signature is not good, or None: it is. Constant time in the secret."""
    given = headers.get(SIGNATURE_HEADER.lower())
    stamp = headers.get(TIMESTAMP_HEADER.lower())
    if not given or not stamp:
        return f"the {SIGNATURE_HEADER} and {TIMESTAMP_HEADER} headers are required"
    try:
        at = int(stamp)
    except ValueError:
        return f"{TIMESTAMP_HEADER} should be Unix seconds"
    if abs(now_seconds - at) > TOLERANCE_SECONDS:
        return f"{TIMESTAMP_HEADER} is more than {TOLERANCE_SECONDS} s from now (a replay?)"
    if not hmac.compare_digest(given.encode(), signature(secret, stamp, body).encode()):
        return "the signature does not match"
    return None


def source_allowed(allowed: list[str] | None, host: str | None) -> bool:
    if allowed is None:
        return True
    if host is None:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(n, strict=False) for n in allowed)
