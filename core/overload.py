"""A saturated or unreachable database answers 503 with Retry-After, never 500.

When every pooled connection is busy for DELLM_DB_POOL_TIMEOUT seconds, or
PostgreSQL refuses a connection (too many clients, starting up, shutting
down), nothing is wrong with the request: the client should come back
shortly. DRF views reach this through `core.api.handler.exception_handler`,
other views through `DatabaseUnavailableMiddleware`.
"""

import logging

import psycopg
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from psycopg_pool import PoolTimeout

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
# Class 08 (connection exception), 53300 too_many_connections, 53400
# configuration_limit_exceeded, 57P01-57P03 admin/crash shutdown, cannot_connect_now.
_UNAVAILABLE_SQLSTATES = ("08", "53300", "53400", "57P01", "57P02", "57P03")
MESSAGE = "The database is busy; please try again in a few seconds."


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not item for item in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE code behind a (possibly wrapped) database error, for logs and decisions."""
    for link in _chain(exc):
        code = getattr(link, "sqlstate", None)
        if code:
            return str(code)
    return None


def database_unavailable(exc: BaseException) -> bool:
    """True for errors that say "no connection right now", not "this query is wrong"."""
    if not isinstance(exc, (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)):
        return False
    chain = _chain(exc)
    if any(isinstance(link, PoolTimeout) for link in chain):
        return True
    code = sqlstate(exc)
    if code is None:
        # A connection that could not be made or was lost carries no SQLSTATE.
        return any(isinstance(link, (psycopg.OperationalError, psycopg.InterfaceError)) for link in chain) or (
            isinstance(exc, InterfaceError)
        )
    return code.startswith(_UNAVAILABLE_SQLSTATES)


def log_unavailable(exc: BaseException, where: str) -> None:
    logger.warning("database unavailable in %s: %s sqlstate=%s", where, type(exc).__name__, sqlstate(exc) or "none")


def unavailable_response(request: HttpRequest) -> HttpResponse:
    from core.errors import error_body

    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(error_body("service_unavailable", MESSAGE), status=503)
    else:
        response = HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """503 + Retry-After for a database outage raised by a non-DRF view (pages, admin).

    A MiddlewareMixin, so it is async-capable and the ASGI handler keeps async
    views (the turn stream) off threads.
    """

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if database_unavailable(exception):
            log_unavailable(exception, request.resolver_match.view_name if request.resolver_match else "a view")
            return unavailable_response(request)
        return None
