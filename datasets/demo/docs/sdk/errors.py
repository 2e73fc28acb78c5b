"""Exception types raised by the Lumen Python SDK.

Every error returned by the Lumen API is converted into a subclass of
:class:`LumenError`. Client code should branch on the exception class or on
the stable ``code`` attribute, never on the human-readable message.

Two exceptions in this module are not API errors at all:
:class:`PermanentFailure` is raised *by your handlers* to stop retries, and
:class:`JobCancelled` is raised *into your handlers* when a running job is
cancelled.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional


class LumenError(Exception):
    """Base class for all errors reported by the Lumen API.

    Attributes:
        message: Human-readable description from the server.
        code: Stable error code such as ``"not_found"`` or ``"conflict"``.
        status: HTTP status code of the response, or ``None`` for errors
            that happened before a response was received.
        reason: Optional, more specific sub-code such as ``"lease_lost"``.
        request_id: Value of the ``Lumen-Request-Id`` header, useful when
            contacting support.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "unknown",
        status: Optional[int] = None,
        reason: Optional[str] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.reason = reason
        self.request_id = request_id

    def __str__(self) -> str:
        suffix = f" (request {self.request_id})" if self.request_id else ""
        return f"[{self.code}] {self.message}{suffix}"


class InvalidRequestError(LumenError):
    """The request was malformed (HTTP 400)."""


class AuthenticationError(LumenError):
    """The API key is missing, unknown, expired or revoked (HTTP 401)."""


class PermissionDeniedError(LumenError):
    """The API key lacks a scope, or the edition lacks a feature (HTTP 403)."""


class NotFoundError(LumenError):
    """The requested job, queue, workflow or run does not exist (HTTP 404)."""


class ConflictError(LumenError):
    """The operation conflicts with the current state (HTTP 409).

    Inspect :attr:`reason` to distinguish, for example,
    ``invalid_state_transition`` from ``idempotency_key_reused``.
    """


class LeaseLost(ConflictError):
    """The worker's lease on a job expired or was taken over.

    The worker must abandon the job without reporting an outcome, because
    another worker may already be processing it.
    """


class PayloadTooLargeError(LumenError):
    """The payload exceeded 256 KiB or the body exceeded the endpoint limit (HTTP 413)."""


class ValidationError(LumenError):
    """The request was well-formed but failed validation (HTTP 422).

    Attributes:
        field: Dotted path of the offending field, e.g. ``"retry.max_delay"``,
            when the server reported one.
    """

    def __init__(self, message: str, *, field: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.field = field


class RateLimitError(LumenError):
    """Too many requests for this API key (HTTP 429).

    The client has already retried ``max_retries`` times before raising this.

    Attributes:
        retry_after: Seconds the server asked us to wait, taken from the
            ``Retry-After`` header, or ``None`` if the header was missing.
    """

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServiceUnavailableError(LumenError):
    """The node is starting, draining or has pending migrations (HTTP 503)."""


class InternalServerError(LumenError):
    """An unexpected server-side error (HTTP 500). Please report it."""


class PermanentFailure(Exception):
    """Raise from a handler to fail a job without further retries.

    The job moves directly to the ``failed`` state, regardless of how many
    attempts remain. Use it for errors that cannot succeed on retry, such as
    a payload that references a record which no longer exists.

    Example:
        >>> raise PermanentFailure("customer account was deleted")
    """


class JobCancelled(Exception):
    """Raised inside a handler when the job is cancelled while running.

    The worker learns about the cancellation from a heartbeat response and
    injects this exception the next time the handler calls
    ``job.check_cancelled()``. Handlers may catch it to clean up, but should
    re-raise it afterwards.
    """


_STATUS_TO_CLASS: Mapping[int, type] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitError,
    500: InternalServerError,
    503: ServiceUnavailableError,
}


def error_from_response(
    status: int,
    body: Optional[Mapping[str, Any]],
    headers: Optional[Mapping[str, str]] = None,
) -> LumenError:
    """Build the matching exception for an error response.

    Args:
        status: HTTP status code of the response.
        body: Decoded JSON body, or ``None`` if the body was empty or not JSON.
        headers: Response headers; used for ``Retry-After`` and the request ID.

    Returns:
        An instance of the most specific :class:`LumenError` subclass. Unknown
        status codes map to the base class. A 409 with reason ``lease_lost``
        becomes :class:`LeaseLost`.
    """
    headers = headers or {}
    envelope = (body or {}).get("error", {}) if isinstance(body, Mapping) else {}
    message = envelope.get("message") or f"HTTP {status}"
    kwargs: dict = {
        "code": envelope.get("code", "unknown"),
        "status": status,
        "reason": envelope.get("reason"),
        "request_id": envelope.get("request_id") or headers.get("Lumen-Request-Id"),
    }
    if status == 409 and kwargs["reason"] == "lease_lost":
        return LeaseLost(message, **kwargs)
    cls = _STATUS_TO_CLASS.get(status, LumenError)
    if cls is ValidationError:
        return ValidationError(message, field=envelope.get("field"), **kwargs)
    if cls is RateLimitError:
        raw = headers.get("Retry-After")
        retry_after = float(raw) if raw is not None else None
        return RateLimitError(message, retry_after=retry_after, **kwargs)
    return cls(message, **kwargs)
