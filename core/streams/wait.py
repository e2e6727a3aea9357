"""The wait loop: read a state, wait on its channel, read again, without a thread or a database connection held."""

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

import redis
import redis.asyncio
from django.db import DatabaseError, InterfaceError

from core import overload
from core.streams.pubsub import subscribe_async, subscribe_sync
from core.streams.sse import PING_EVERY, EventStreamRenderer

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
# A read of the state that found the database saturated (every pooled connection
# busy for DELLM_DB_POOL_TIMEOUT) is tried again this much later; the stream
# stays open meanwhile, since its 200 is already sent and a 503 can no longer be.
READ_AGAIN_AFTER = float(overload.RETRY_AFTER_SECONDS)


# --- The wait loop --------------------------------------------------------------


class Watch(Generic[S]):
    """What one stream says: parts to send (SSE text) for each event and each read of the state `S`.

    The loop owns the waiting (pings, rechecks, the deadline, cancellation);
    a watch owns the words.
    """

    def opening(self) -> list[str]:
        """Parts sent as soon as the stream starts."""
        return []

    def message(self, payload: dict[str, Any]) -> tuple[list[str], bool]:
        """Parts for one event on the channel, and whether the state should be read now."""
        return [], True

    def state(self, state: S) -> tuple[list[str], bool]:
        """Parts for one read of the state, and whether the stream is over."""
        raise NotImplementedError

    def timeout(self) -> list[str]:
        """Parts sent when the deadline passes first."""
        return []


@dataclass(frozen=True)
class _Wait:
    """Step: the next message on the channel, waiting at most `seconds` (the driver sends it back, or None)."""

    seconds: float


class _Read:
    """Step: read the state (the driver sends it back, or _UNREAD)."""


_READ = _Read()
# What the driver sends back for a read the database could not serve now.
_UNREAD = object()
_Step = str | _Wait | _Read


def _wait_loop(watch: Watch[S], *, timeout: float, recheck: float, read_first: bool) -> Generator[_Step, Any, None]:
    """The one wait loop, without I/O: it yields parts to send and steps for its driver to do.

    With `read_first`, the state is read before any wait (the caller has
    subscribed, so a change committed in between is announced). Then it waits
    on the channel; the state is read again when the watch asks (a message
    says it changed) and every `recheck` seconds, in case a message was lost.
    Messages already queued behind one that asks for a read are handled
    first, so a burst of pings costs one read. A read the database could not
    serve (the driver sends back _UNREAD) is tried again READ_AGAIN_AFTER
    seconds later. A comment every PING_EVERY seconds; the watch's `timeout()`
    after `timeout` seconds.
    """
    yield from watch.opening()
    started = time.monotonic()
    deadline = started + timeout
    next_ping = started + PING_EVERY
    next_check = started + recheck
    read = read_first
    while True:
        if read:
            state = yield _READ
            if state is _UNREAD:
                next_check = min(next_check, time.monotonic() + READ_AGAIN_AFTER)
            else:
                parts, over = watch.state(state)
                yield from parts
                if over:
                    return
        now = time.monotonic()
        if now >= deadline:
            break
        payload = yield _Wait(max(0.0, min(deadline, next_ping, next_check) - now))
        read = False
        while payload is not None:
            parts, wants_read = watch.message(payload)
            yield from parts
            read = read or wants_read
            payload = (yield _Wait(0.0)) if read else None
        now = time.monotonic()
        if now >= next_check:
            next_check = now + recheck
            read = True
        if now >= next_ping:
            next_ping = now + PING_EVERY
            yield EventStreamRenderer.PING
    yield from watch.timeout()


def _unread(exc: DatabaseError | InterfaceError) -> object:
    """_UNREAD for a saturated or unreachable database (logged: class and SQLSTATE); anything else propagates."""
    if not overload.database_unavailable(exc):
        raise exc
    overload.log_unavailable(exc, "an event stream")
    return _UNREAD


def _payload(message: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if message is None else json.loads(message["data"])


async def watch_async(
    subscription: str | redis.asyncio.client.PubSub,
    watch: Watch[S],
    *,
    load: Callable[[], Awaitable[S]],
    timeout: float,
    recheck: float,
    read_first: bool = True,
) -> AsyncIterator[str]:
    """`_wait_loop` on the event loop: a channel name (subscribed when the stream starts) or a subscription.

    The subscription is closed however the stream ends: done, timed out, or
    cancelled by the server when the client goes away.
    """
    pubsub = None
    try:
        pubsub = await subscribe_async(subscription) if isinstance(subscription, str) else subscription
        steps = _wait_loop(watch, timeout=timeout, recheck=recheck, read_first=read_first)
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration:
                return
            reply = None
            if isinstance(step, str):
                yield step
            elif isinstance(step, _Wait):
                reply = _payload(await pubsub.get_message(ignore_subscribe_messages=True, timeout=step.seconds))
            else:
                try:
                    reply = await load()
                except (DatabaseError, InterfaceError) as exc:
                    reply = _unread(exc)
    finally:
        if pubsub is not None:
            await pubsub.aclose()


def watch_sync(
    subscription: str | redis.client.PubSub,
    watch: Watch[S],
    *,
    load: Callable[[], S],
    timeout: float,
    recheck: float,
    read_first: bool = True,
) -> Iterator[str]:
    """`_wait_loop` on a blocking thread (WSGI), like `watch_async`."""
    pubsub = None
    try:
        pubsub = subscribe_sync(subscription) if isinstance(subscription, str) else subscription
        steps = _wait_loop(watch, timeout=timeout, recheck=recheck, read_first=read_first)
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration:
                return
            reply = None
            if isinstance(step, str):
                yield step
            elif isinstance(step, _Wait):
                reply = _payload(pubsub.get_message(ignore_subscribe_messages=True, timeout=step.seconds))
            else:
                try:
                    reply = load()
                except (DatabaseError, InterfaceError) as exc:
                    reply = _unread(exc)
    finally:
        if pubsub is not None:
            pubsub.close()
