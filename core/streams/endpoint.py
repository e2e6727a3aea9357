"""An owned event stream endpoint: authenticate, check the owner, take a slot, then stream what the watch says."""

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections, reset_queries
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from rest_framework import exceptions

from core.api.async_auth import error_response
from core.streams.slots import StreamRefused, U, stream_slot_take
from core.streams.sse import event_stream_response

P = ParamSpec("P")
R = TypeVar("R")


# --- Releasing the database connection -----------------------------------------


def on_db_briefly(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` on a pool thread, whose database connection goes back as soon as it returns.

    `thread_sensitive=False`: the thread returns to the executor's pool
    instead of staying bound to the request for the length of its stream, and
    a stream holds no connection between two reads. A read is this thread's
    request: with DEBUG, its query log is cleared as `request_started` clears a
    request's (otherwise each pool thread kept its last 9,000 queries).
    """

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            if settings.DEBUG:  # a test's query capture (DEBUG off) keeps what it counts
                reset_queries()
            connections.close_all()

    return sync_to_async(run, thread_sensitive=False)


# --- An /api/ stream ------------------------------------------------------------


async def owned_event_stream(
    request: HttpRequest,
    *,
    what: str,
    owner_of: Callable[[HttpRequest], Awaitable[U]],
    events: Callable[[U], AsyncIterator[str]],
) -> HttpResponseBase:
    """An `/api/` stream of an object the caller owns (a turn, an import).

    GET only; authenticate and check the object is the caller's (`owner_of`,
    which raises what a DRF view would answer: 401, 404, 503 ...); take one of
    the caller's stream slots (429 beyond the cap); then stream
    `events(owner)`, and the slot goes back when it ends.
    """
    if request.method != "GET":
        return error_response(exceptions.MethodNotAllowed(request.method or ""))
    try:
        owner = await owner_of(request)
    except Exception as exc:
        return error_response(exc)
    try:
        slot = await stream_slot_take(int(owner.pk), what=what, instead=f"or poll the {what}")
    except StreamRefused as refused:
        return refused.api_response()
    return event_stream_response(slot.releasing_async(events(owner)))
