"""The one event-stream kit: wait on Redis pub/sub without a thread or a database connection, under a per-user cap.

Every stream of DeLLM is built from these parts, and no other module calls
Redis's pub/sub API (tests/core/streams/test_stream_kit.py scans for it):
the turn stream (`GET /api/turns/{id}/events/`, chat/turns/stream_view.py), the import
stream (`GET /api/imports/{id}/events/`, chat/imports/views.py) and `/v1`
completions, streaming or not (assistant/openai/views.py).

- `publish`: what the worker says on a channel (`{"event", "data"}`, ids and
  counts only: pub/sub stores nothing, so a purge leaves no residue in Redis).
- `subscribe_async` / `subscribe_sync`: a subscription Redis has confirmed,
  so a state read after it cannot miss a change announced on the channel.
- `watch_async` / `watch_sync`: the one wait loop (`_wait_loop`), driven by
  asyncio (ASGI) or by a blocking thread (WSGI). What a stream says is a
  `Watch`: its events turned into parts to send, and when to read the state.
- `on_db_briefly`: the one connection-release wrapper: database work on a
  pool thread that hands its connection back at once, so a waiting stream
  holds none.
- `stream_slot_take` -> `StreamSlot` or `StreamRefused`: the per-user cap
  (DELLM_MAX_STREAMS_PER_USER) shared by every stream, and the one refusal,
  which each door words in its own error shape.
- `EventStreamRenderer`: the one place an event is framed, and the media type
  of the streams' schema.
- `owned_event_stream`: an `/api/` stream of an object the caller owns."""

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from django.http import StreamingHttpResponse
from rest_framework.renderers import BaseRenderer

# An idle stream sends a comment this often, so that proxies keep it open.
PING_EVERY = 15.0


# --- Framing --------------------------------------------------------------------


class EventStreamRenderer(BaseRenderer):
    """`text/event-stream`, the media type of every stream; its events are framed here.

    As a DRF renderer (the streams' schema views) it renders an error as its
    JSON text: a stream's errors come before the stream, as JSON.
    """

    media_type = "text/event-stream"
    format = "event-stream"
    PING = ": ping\n\n"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        return json.dumps(data).encode()

    @staticmethod
    def frame(data: str, *, event: str | None = None) -> str:
        return (f"event: {event}\n" if event is not None else "") + f"data: {data}\n\n"

    @classmethod
    def event(cls, name: str, data: Mapping[str, Any]) -> str:
        """A named event with a JSON body (the `/api/` streams)."""
        return cls.frame(json.dumps(data), event=name)

    @classmethod
    def data(cls, payload: Mapping[str, Any]) -> str:
        """An unnamed event with a JSON body (OpenAI's chunks)."""
        return cls.frame(json.dumps(payload))


def event_stream_response(
    events: Iterator[str] | AsyncIterator[str], *, cache_control: str = "no-cache"
) -> StreamingHttpResponse:
    response = StreamingHttpResponse(events, content_type=EventStreamRenderer.media_type)
    response["Cache-Control"] = cache_control
    # Tells nginx-style proxies not to buffer the stream.
    response["X-Accel-Buffering"] = "no"
    return response
