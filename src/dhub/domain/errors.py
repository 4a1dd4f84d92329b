"""One exception tree for the whole product; the API maps it to HTTP in one place."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with an input document, located by a JSON pointer into that document."""

    loc: str
    message: str
    code: str

    def as_dict(self) -> dict[str, str]:
        return {"loc": self.loc, "message": self.message, "code": self.code}


class DhubError(Exception):
    """Base of every error dhub raises on purpose."""

    status_code = 500

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidInput(DhubError):
    """A document or parameter failed validation; ``errors`` lists every problem found."""

    status_code = 422

    def __init__(self, errors: list[FieldError], detail: str | None = None) -> None:
        count = len(errors)
        summary = detail or (
            f"Validation failed with {count} problem{'s' if count != 1 else ''}: "
            + "; ".join(f"{e.loc or '/'}: {e.message}" for e in errors[:3])
            + ("; ..." if count > 3 else "")
        )
        super().__init__(summary)
        self.errors = errors


class Unauthenticated(DhubError):
    status_code = 401


class Forbidden(DhubError):
    status_code = 403


class NotFound(DhubError):
    status_code = 404


class Conflict(DhubError):
    status_code = 409


class TooLarge(DhubError):
    status_code = 413


class BadGateway(DhubError):
    """Something dhub talks to for the caller (an MCP server) could not answer."""

    status_code = 502
