"""The client's one exception tree (in the style of httpx ``_exceptions.py``).

Exception hierarchy::

    DhubClientError
    ├── ConfigurationError        no server URL or token could be resolved
    ├── ServerUnreachable         the request never got an HTTP response
    ├── AmbiguousName             a name given for an id stands for several resources
    └── DhubAPIError              the server answered with an error status
        ├── Unauthenticated       401
        ├── Forbidden             403
        ├── NotFound              404
        │   └── UnknownName       no resource the caller can see has the name given for an id
        ├── Conflict              409
        └── InvalidInput          422 (``errors`` says which fields and why)

Callers who only care that "something went wrong talking to dhub" catch ``DhubClientError``;
those who handle one case (say, a missing agent) catch its subclass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class FieldError:
    """One problem the server found: ``loc`` is a JSON pointer into the request."""

    loc: str
    message: str
    code: str

    @classmethod
    def from_json(cls, raw: Any) -> FieldError:
        if not isinstance(raw, dict):
            return cls("", str(raw), "unknown")
        return cls(str(raw.get("loc", "")), str(raw.get("message", "")), str(raw.get("code", "")))


class DhubClientError(Exception):
    """Base class of every error the client raises."""


class ConfigurationError(DhubClientError):
    """The server URL or token could not be resolved."""


class ServerUnreachable(DhubClientError):
    """The request failed before an HTTP response arrived (connection refused, timeout...)."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class DhubAPIError(DhubClientError):
    """The server answered with an error status; ``detail`` and ``errors`` are its body."""

    def __init__(
        self,
        detail: str,
        *,
        status_code: int,
        errors: list[FieldError] | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status_code = status_code
        self.errors: list[FieldError] = errors or []
        self.response = response

    def __str__(self) -> str:
        lines = [f"{self.detail} (HTTP {self.status_code})"]
        lines.extend(f"{e.loc or '(document)'}: {e.message}" for e in self.errors)
        return "\n".join(lines)


class Unauthenticated(DhubAPIError):
    """401: the token is missing, unknown or revoked."""


class Forbidden(DhubAPIError):
    """403: the caller may see the resource but not do this to it."""


class NotFound(DhubAPIError):
    """404: no such resource, or the caller may not see it."""


class UnknownName(NotFound):
    """A name was given where an id goes, and no resource of that category the caller can see
    has it (a resource the caller may not see is not named either: the same 404)."""

    def __init__(self, category: str, name: str) -> None:
        plural = "ontologies" if category == "ontology" else f"{category}s"
        lister = "Client.iter_agents()" if category == "agent" else f"GET /api/v1/{plural}"
        super().__init__(
            f"No {category} named '{name}' that you can see; {lister} lists the ones you can.",
            status_code=404,
        )
        self.category = category
        self.name = name

    def __str__(self) -> str:
        return self.detail  # no "(HTTP 404)": no request answered 404, a lookup found nothing


class AmbiguousName(DhubClientError):
    """A name was given where an id goes, and several resources the caller can see have it
    (names are unique per folder only). ``matches`` holds them; pass one's id instead."""

    def __init__(self, category: str, name: str, matches: Sequence[dict[str, Any]]) -> None:
        where = ", ".join(f"{m.get('id')} ({_folder(m)})" for m in matches)
        super().__init__(
            f"{len(matches)} {'ontologies' if category == 'ontology' else category + 's'} you "
            f"can see are named '{name}': {where}; "
            "give the id of the one you mean."
        )
        self.category = category
        self.name = name
        self.matches = list(matches)


def _folder(resource: dict[str, Any]) -> str:
    folder = resource.get("folder_id")
    return f"folder {folder}" if folder else "top level"


class Conflict(DhubAPIError):
    """409: e.g. the agent name is already taken in that folder."""


class InvalidInput(DhubAPIError):
    """422: the request was understood but is invalid; ``errors`` lists every problem."""


_BY_STATUS: dict[int, type[DhubAPIError]] = {
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: InvalidInput,
}


def error_from_response(response: httpx.Response) -> DhubAPIError:
    """Build the exception for an error response, whatever its body looks like."""
    detail, errors = _parse_error_body(response)
    cls = _BY_STATUS.get(response.status_code, DhubAPIError)
    return cls(detail, status_code=response.status_code, errors=errors, response=response)


def _parse_error_body(response: httpx.Response) -> tuple[str, list[FieldError]]:
    # A proxy in front of the server may answer with HTML or nothing at all; fall back to
    # the status line rather than failing while reporting a failure.
    fallback = response.reason_phrase or f"HTTP {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return (text[:500] if text else fallback), []
    if not isinstance(body, dict):
        return fallback, []
    detail = body.get("detail")
    raw_errors = body.get("errors")
    errors = [FieldError.from_json(e) for e in raw_errors] if isinstance(raw_errors, list) else []
    return (detail if isinstance(detail, str) and detail else fallback), errors
