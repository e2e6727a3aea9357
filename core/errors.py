"""The one domain error type. Views map it to the JSON error format of API.md."""

from typing import Any


class DomainError(Exception):
    """A request the domain refuses; nothing was changed when it is raised."""

    code = "invalid"
    status = 400
    # Seconds after which the same request may succeed (429): sent as `Retry-After`.
    retry_after: float | None = None

    def __init__(self, message: str, *, code: str | None = None, fields: dict | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.fields = fields or {}


class ValidationFailed(DomainError):
    code = "validation_error"
    status = 400


class NotFound(DomainError):
    """Also raised for other owners' objects: existence is never revealed."""

    code = "not_found"
    status = 404


class Conflict(DomainError):
    code = "conflict"
    status = 409


class Throttled(DomainError):
    """Over a rate-limited budget; `retry_after` (seconds) goes out as the Retry-After header."""

    code = "throttled"
    status = 429

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class UpstreamFailed(DomainError):
    """The LLM or embedding endpoint failed; `transient` marks retryable faults."""

    code = "upstream_error"
    status = 502

    def __init__(self, message: str, *, transient: bool = False, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.transient = transient


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}
