"""Provider errors: every failure names the provider, the model, the HTTP status (when there
was one) and says in words what went wrong and, where it can, what to do."""

from __future__ import annotations

from typing import Any, Literal

# An adapter raises a retryable kind only while nothing was yielded: once a delta is out, any
# failure (a timeout, a dropped connection, an error event in the stream) is ``stream_cut``,
# which is never retried, so a retry cannot repeat or change text someone has seen.
ErrorKind = Literal[
    "rate_limited",  # 429: retried
    "overloaded",  # 529 / 503: retried
    "server_error",  # other 5xx: retried
    "connection",  # could not connect, or the connection dropped before any output: retried
    "timeout",  # the call took longer than its timeout: retried
    "stream_cut",  # the stream ended (or broke) after output began: not retried
    "auth",  # 401 / 403
    "bad_request",  # 400 / 404 / 422: the request itself is wrong
    "unsupported",  # the model or provider cannot do what the request asks
    "malformed_tool_call",  # the model's tool-call arguments are not a JSON object
    "invalid_output",  # structured output that is not JSON or does not fit the schema
    "no_provider",  # the provider named is not configured
    "provider_error",  # anything else the provider answered
]

RETRYABLE: frozenset[str] = frozenset(
    {"rate_limited", "overloaded", "server_error", "connection", "timeout"}
)


class ProviderError(Exception):
    """A model call that failed. ``retry_after`` is the provider's ``Retry-After`` (seconds)."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        provider: str,
        model: str,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.kind = kind
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        self.retry_after = retry_after
        super().__init__(str(self))

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.provider} model '{self.model}'{status}: {self.message}"

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    def details(self) -> dict[str, Any]:
        """What a run's error records besides ``kind`` and ``message``."""
        details: dict[str, Any] = {"provider": self.provider, "model": self.model}
        if self.status is not None:
            details["status"] = self.status
        return details


class UnsupportedFeature(ProviderError):
    """The request asks for something this provider or model cannot do: nothing is dropped
    silently, the call fails before it is sent."""

    def __init__(self, message: str, *, provider: str, model: str) -> None:
        super().__init__("unsupported", message, provider=provider, model=model)


def kind_for_status(status: int) -> ErrorKind:
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server_error"
    if status in (401, 403):
        return "auth"
    if status in (400, 404, 409, 413, 422):
        return "bad_request"
    return "provider_error"


def retry_after_seconds(headers: Any) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds, or an HTTP date) from response headers;
    None when absent or unreadable."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    from datetime import UTC, datetime
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
