"""`GET /api/turns/{id}/events/`: a turn's progress as Server-Sent Events, from an async view.

A stream may stay open for DELLM_SSE_TIMEOUT seconds while the worker
generates. A thread and a database connection per open stream would let a
hundred streams exhaust PostgreSQL (issue 13, finding 6), so this view holds
neither while it waits:

1. authenticate (the configured DRF authentication classes) and check the
   turn is the caller's: one short synchronous step on a pool thread, whose
   database connection goes back to the pool at once;
2. take one of the caller's stream slots (Redis, DELLM_MAX_STREAMS_PER_USER; 429 beyond);
3. in the stream: subscribe to the turn's channel, and only then read the
   turn (an outcome committed in between is either in that read or announced
   on the channel); then wait on Redis pub/sub (`redis.asyncio`), reading the
   turn again only when the channel says it changed.

Served by the ASGI server (uvicorn); `dellm_site/asgi.py` keeps Django from
parking a per-request thread for the length of the stream. Under a WSGI
server (pytest-django's live_server) it still answers, but Django buffers an
async stream there, so events arrive together at the end.
"""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar, cast

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import close_old_connections, connection
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from chat import selectors
from chat.serializers import TurnSerializer
from chat.streams import stream_slot_acquire, stream_slot_release, turn_event_stream
from dellm_site.api import errors
from dellm_site.api_async import authenticate, error, error_response

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def briefly_on_db(fn: Callable[P, R]) -> Callable[P, Any]:
    """Run `fn` on a pool thread and hand its database connection back when it returns.

    `thread_sensitive=False`: the thread returns to the executor's pool
    instead of staying bound to this request for the length of the stream.
    """

    @wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            connection.close()

    return sync_to_async(run, thread_sensitive=False)


@briefly_on_db
def _owner_of(request: HttpRequest, turn_id: int) -> User:
    user = cast(User, authenticate(request))
    selectors.turn_get(owner=user, turn_id=turn_id)
    return user


@briefly_on_db
def _turn_state(owner: User, turn_id: int) -> tuple[str, dict[str, Any]]:
    turn = selectors.turn_get(owner=owner, turn_id=turn_id)
    return turn.status, dict(TurnSerializer(turn).data)


def _unavailable(what: str) -> HttpResponseBase:
    return error(503, "service_unavailable", f"The {what} is busy; please try again shortly.", {"Retry-After": 5})


async def stream_slot_or_refusal(owner_id: int, what: str) -> str | HttpResponseBase:
    """One of the caller's stream slots, or the answer to give instead (429 when all are taken, 503 without Redis).

    Shared by every stream of the API: the turn and import streams.
    """
    try:
        slot = await stream_slot_acquire(owner_id)
    except redis.RedisError as exc:
        logger.warning("user %s: Redis refused a %s stream (%s)", owner_id, what, type(exc).__name__)
        return _unavailable("event service")
    if slot is None:
        return error(
            429,
            "throttled",
            f"At most {settings.DELLM_MAX_STREAMS_PER_USER} streams may be open at once; close one first "
            f"(or poll the {what}).",
            {"Retry-After": 5},
        )
    return slot


def event_stream_response(events: AsyncIterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    # Tells nginx-style proxies not to buffer the stream.
    response["X-Accel-Buffering"] = "no"
    return response


async def owned_event_stream(
    request: HttpRequest,
    *,
    what: str,
    owner_of: Callable[[HttpRequest], Awaitable[User]],
    events: Callable[[User, Callable[[], Awaitable[None]]], AsyncIterator[str]],
) -> HttpResponseBase:
    """Every event stream of the API (turns, imports): GET only; authenticate and
    check the object is the caller's (the answers a DRF view gives: 401, 404,
    503 ...); take one of the caller's stream slots (429 beyond the cap); then
    stream `events(owner, release)`, which releases the slot when it closes.
    """
    if request.method != "GET":
        return error_response(exceptions.MethodNotAllowed(request.method or ""))
    try:
        owner = await owner_of(request)
    except Exception as exc:
        return error_response(exc)
    owner_id = int(owner.pk)
    slot = await stream_slot_or_refusal(owner_id, what)
    if not isinstance(slot, str):
        return slot

    async def release() -> None:
        await stream_slot_release(owner_id, slot)

    return event_stream_response(events(owner, release))


async def turn_events(request: HttpRequest, turn_id: int) -> HttpResponseBase:
    return await owned_event_stream(
        request,
        what="turn",
        owner_of=lambda request: _owner_of(request, turn_id),
        events=lambda owner, release: turn_event_stream(
            turn_id=turn_id,
            load=lambda: _turn_state(owner, turn_id),
            timeout=settings.DELLM_SSE_TIMEOUT,
            recheck=settings.DELLM_SSE_RECHECK,
            on_close=release,
        ),
    )


class EventStreamRenderer(BaseRenderer):
    """Lets the schema say `text/event-stream`; errors are JSON."""

    media_type = "text/event-stream"
    format = "event-stream"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return b""


class TurnEventsSchema(APIView):
    """The OpenAPI description of `turn_events` (drf-spectacular reads views' classes; this one never runs)."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description="Events `status`, `token`, `reset`, then `reply` or `failed` (Turn JSON); "
                "`timeout` if the turn is still unfinished after DELLM_SSE_TIMEOUT seconds.",
            ),
            **errors(404, 429),
        },
        summary="A turn's progress as Server-Sent Events",
        description="At most DELLM_MAX_STREAMS_PER_USER streams per user are open at once (429 beyond).",
    )
    def get(self, request: Request, turn_id: int) -> None:
        raise NotImplementedError  # served by chat.events.turn_events


turn_events.cls = TurnEventsSchema  # type: ignore[attr-defined]
turn_events.initkwargs = {}  # type: ignore[attr-defined]
