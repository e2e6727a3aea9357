"""Live turn events between the worker and the turn stream, over Redis pub/sub (core/streams/).

The worker publishes on a per-turn channel: `status` (the turn started
running), `token` and `reset` while a reply is generated, and `changed` once
the turn's row changed for good (done or failed). Pub/sub is fire-and-forget:
nothing is stored in Redis, so a purge leaves no residue there; a subscriber
that joins late gets the final reply from the database. Publishing never
fails a turn.

`TurnWatch` says what the turn stream (chat/turns/stream_view.py) sends; the waiting is
the kit's: it reads the database only when the channel says the turn changed
(and every DELLM_SSE_RECHECK seconds, in case a message was lost).
"""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from django.conf import settings

from core.redis_ns import key
from core.streams.pubsub import publish
from core.streams.sse import EventStreamRenderer
from core.streams.wait import Watch, watch_async

logger = logging.getLogger(__name__)

# What the stream forwards from the channel as it is.
FORWARDED = ("token", "reset")
FINAL = {"done": "reply", "failed": "failed"}

TurnState = tuple[str, dict[str, Any]]


def channel(turn_id: int) -> str:
    return key(settings.DELLM_REDIS_PREFIX, "turn", turn_id)


def turn_publish(turn_id: int, event: str, data: dict[str, Any]) -> None:
    if not publish(channel(turn_id), event, data):
        logger.warning("turn %s: could not publish a %s event", turn_id, event)


class TurnWatch(Watch[TurnState]):
    """Server-Sent Events for one turn: its status as it changes, tokens, then `reply` or `failed`.

    Tokens published before the subscription are not replayed: the final
    `reply` carries the whole text.
    """

    def __init__(self) -> None:
        self.status: str | None = None

    def _status(self) -> str:
        return EventStreamRenderer.event("status", {"status": self.status})

    def message(self, payload: dict[str, Any]) -> tuple[list[str], bool]:
        event = payload.get("event")
        data = payload.get("data") or {}
        if event in FORWARDED:
            parts = []
            if self.status == "pending":
                # The worker's `status` message may arrive after its first token.
                self.status = "running"
                parts.append(self._status())
            return [*parts, EventStreamRenderer.event(str(event), data)], False
        if event == "status" and data.get("status") not in (None, self.status):
            self.status = str(data["status"])
            if self.status in FINAL:
                return [], True
            return [self._status()], False
        return [], event == "changed"

    def state(self, state: TurnState) -> tuple[list[str], bool]:
        status, body = state
        if status in FINAL:
            return [EventStreamRenderer.event(FINAL[status], {"turn": body})], True
        if status != self.status:
            self.status = status
            return [self._status()], False
        return [], False

    def timeout(self) -> list[str]:
        return [EventStreamRenderer.event("timeout", {"status": self.status})]


def turn_event_stream(
    *, turn_id: int, load: Callable[[], Awaitable[TurnState]], timeout: float, recheck: float
) -> AsyncIterator[str]:
    """The turn's channel is subscribed before the first `load()` (the turn's status and JSON), so an
    outcome committed in between is seen: either in that read or as a `changed` message."""
    return watch_async(channel(turn_id), TurnWatch(), load=load, timeout=timeout, recheck=recheck)
