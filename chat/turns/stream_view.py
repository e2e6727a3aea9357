"""`GET /api/turns/{id}/events/`: a turn's progress as Server-Sent Events, from an async view.

A stream may stay open for DELLM_SSE_TIMEOUT seconds while the worker
generates. A thread and a database connection per open stream would let a
hundred streams exhaust PostgreSQL, so this view holds
neither while it waits (the event-stream kit, core/streams/):

1. authenticate (the configured DRF authentication classes) and check the
   turn is the caller's: one short synchronous step on a pool thread, whose
   database connection goes back at once;
2. take one of the caller's stream slots (Redis, DELLM_MAX_STREAMS_PER_USER; 429 beyond);
3. in the stream: subscribe to the turn's channel, and only then read the
   turn (an outcome committed in between is either in that read or announced
   on the channel); then wait on Redis pub/sub, reading the turn again only
   when the channel says it changed (chat/turns/stream.py says what is sent).

Served by the ASGI server (uvicorn); `dellm_site/asgi.py` keeps Django from
parking a per-request thread for the length of the stream. Under a WSGI
server (pytest-django's live_server) it still answers, but Django buffers an
async stream there, so events arrive together at the end.
"""

from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from chat.selectors import turn_get
from chat.serializers import TurnSerializer
from chat.turns.stream import turn_event_stream
from core.api.async_auth import authenticate
from core.api.handler import errors
from core.streams.endpoint import on_db_briefly, owned_event_stream
from core.streams.sse import EventStreamRenderer


@on_db_briefly
def _owner_of(request: HttpRequest, turn_id: int) -> User:
    user = cast(User, authenticate(request))
    turn_get(owner=user, turn_id=turn_id)
    return user


@on_db_briefly
def _turn_state(owner: User, turn_id: int) -> tuple[str, dict[str, Any]]:
    turn = turn_get(owner=owner, turn_id=turn_id)
    return turn.status, dict(TurnSerializer(turn).data)


async def turn_events(request: HttpRequest, turn_id: int) -> HttpResponseBase:
    return await owned_event_stream(
        request,
        what="turn",
        owner_of=lambda request: _owner_of(request, turn_id),
        events=lambda owner: turn_event_stream(
            turn_id=turn_id,
            load=lambda: _turn_state(owner, turn_id),
            timeout=settings.DELLM_SSE_TIMEOUT,
            recheck=settings.DELLM_SSE_RECHECK,
        ),
    )


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
        raise NotImplementedError  # served by chat.turns.stream_view.turn_events


turn_events.cls = TurnEventsSchema  # type: ignore[attr-defined]
turn_events.initkwargs = {}  # type: ignore[attr-defined]
