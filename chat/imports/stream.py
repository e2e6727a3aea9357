"""An import job's progress as Server-Sent Events.

The worker saves the job's counts to its row and publishes a bare "changed"
ping (the job id, nothing else) on the job's Redis channel. The stream waits
on that channel with the event-stream kit (core/streams/), like
the turn stream, and reads the row only on a ping, or every
DELLM_SSE_RECHECK seconds in case a ping was lost. Nothing of the file's
content goes through Redis.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from django.conf import settings

from core.redis_ns import key
from core.streams.pubsub import publish
from core.streams.sse import EventStreamRenderer
from core.streams.wait import Watch, watch_async

logger = logging.getLogger(__name__)

FINAL = ("done", "failed")

ImportState = tuple[str, dict[str, Any]]


def channel(job_id: int) -> str:
    # Under this instance's prefix, like every Redis key and channel (core/redis_ns.py).
    return key(settings.DELLM_REDIS_PREFIX, "import", job_id)


def import_publish(job_id: int) -> None:
    if not publish(channel(job_id), "changed", {"id": job_id}):
        logger.warning("import %s: could not publish progress", job_id)


class ImportWatch(Watch[ImportState]):
    """`progress` events with the job's JSON whenever its counts change, then `done` or `failed`.

    Every message on the channel means "read the row" (the kit's default).
    """

    def __init__(self) -> None:
        self.last: dict[str, Any] | None = None

    def state(self, state: ImportState) -> tuple[list[str], bool]:
        status, body = state
        if status in FINAL:
            return [EventStreamRenderer.event(status, {"import": body})], True
        if body != self.last:
            self.last = body
            return [EventStreamRenderer.event("progress", {"import": body})], False
        return [], False

    def timeout(self) -> list[str]:
        return [EventStreamRenderer.event("timeout", {"status": self.last["status"] if self.last else None})]


def import_event_stream(
    *, job_id: int, load: Callable[[], Awaitable[ImportState]], timeout: float, recheck: float
) -> AsyncIterator[str]:
    """Subscribes before the first `load()`, so a change committed in between is announced rather than lost."""
    return watch_async(channel(job_id), ImportWatch(), load=load, timeout=timeout, recheck=recheck)
