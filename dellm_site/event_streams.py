"""The one event-stream kit: wait on Redis pub/sub without a thread or a database connection, under a per-user cap.

Every stream of DeLLM is built from these parts, and no other module calls
Redis's pub/sub API (tests/dellm_site/test_event_streams.py scans for it):
the turn stream (`GET /api/turns/{id}/events/`, chat/events.py), the import
stream (`GET /api/imports/{id}/events/`, chat/import_views.py) and `/v1`
completions, streaming or not (assistant/completions_views.py).

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
- `owned_event_stream`: an `/api/` stream of an object the caller owns.
"""

import asyncio
import functools
import json
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping
from contextlib import aclosing, closing
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

import redis
import redis.asyncio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import DatabaseError, InterfaceError, close_old_connections, connections, reset_queries
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from rest_framework import exceptions
from rest_framework.renderers import BaseRenderer

from dellm_site import overload
from dellm_site.api_async import error, error_response
from dellm_site.redis_ns import key

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
U = TypeVar("U", bound=AbstractBaseUser)

# An idle stream sends a comment this often, so that proxies keep it open.
PING_EVERY = 15.0
# Redis answers a SUBSCRIBE at once; one that does not is as good as down.
SUBSCRIBE_WITHIN = 5.0
RETRY_AFTER = 5
# A read of the state that found the database saturated (every pooled connection
# busy for DELLM_DB_POOL_TIMEOUT) is tried again this much later; the stream
# stays open meanwhile, since its 200 is already sent and a 503 can no longer be.
READ_AGAIN_AFTER = float(overload.RETRY_AFTER_SECONDS)


# --- Clients and publishing -----------------------------------------------------


@functools.cache
def redis_client() -> redis.Redis:
    """The process's blocking client: publishing, and waiting under WSGI."""
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2, **settings.DELLM_REDIS_OPTIONS
    )


# One asyncio client (and its connection pool) per event loop: the ASGI server
# has one loop; async code run through async_to_sync (WSGI, tests) gets a fresh one each time.
_async_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, redis.asyncio.Redis]" = (
    weakref.WeakKeyDictionary()
)


def async_redis_client() -> redis.asyncio.Redis:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        # Each open stream holds one connection for its subscription: the
        # pool must be as large as the streams one process serves.
        client = redis.asyncio.Redis.from_url(
            settings.REDIS_URL,
            socket_connect_timeout=2,
            **settings.DELLM_REDIS_OPTIONS,
            max_connections=settings.DELLM_REDIS_MAX_CONNECTIONS,
        )
        _async_clients[loop] = client
    return client


def publish(channel: str, event: str, data: Mapping[str, Any]) -> bool:
    """Say `event` on `channel`; False if Redis is unreachable (the caller logs it: publishing never fails a task)."""
    try:
        redis_client().publish(channel, json.dumps({"event": event, "data": dict(data)}))
    except redis.RedisError:
        return False
    return True


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


# --- Subscribing ----------------------------------------------------------------


def _confirmed(message: dict[str, Any] | None) -> None:
    if message is None or message.get("type") != "subscribe":
        raise redis.TimeoutError(f"Redis did not confirm a subscription within {SUBSCRIBE_WITHIN}s")


async def subscribe_async(channel: str) -> redis.asyncio.client.PubSub:
    """A subscription to `channel`, confirmed: what is published from now on is received."""
    pubsub = async_redis_client().pubsub()
    try:
        await pubsub.subscribe(channel)
        _confirmed(await pubsub.get_message(timeout=SUBSCRIBE_WITHIN))
    except BaseException:
        await pubsub.aclose()
        raise
    return pubsub


def subscribe_sync(channel: str) -> redis.client.PubSub:
    """`subscribe_async` with the blocking client (WSGI)."""
    pubsub = redis_client().pubsub()
    try:
        pubsub.subscribe(channel)
        _confirmed(pubsub.get_message(timeout=SUBSCRIBE_WITHIN))
    except BaseException:
        pubsub.close()
        raise
    return pubsub


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


# --- Per-user stream slots ------------------------------------------------------
# A sorted set per user: one member per open stream, scored by the time its
# slot lapses. A process that dies without releasing leaks nothing for long:
# lapsed members are dropped on the next acquire, and the key itself expires.


def slots_key(user_id: int) -> str:
    return key(settings.DELLM_REDIS_PREFIX, "streams", user_id)


async def stream_slot_acquire(user_id: int) -> str | None:
    """Take one of the user's DELLM_MAX_STREAMS_PER_USER slots; None if all are taken."""
    now = time.time()
    ttl = settings.DELLM_SSE_TIMEOUT + 60
    member = uuid.uuid4().hex
    slots = slots_key(user_id)
    async with async_redis_client().pipeline(transaction=True) as pipe:
        pipe.zremrangebyscore(slots, "-inf", now)
        pipe.zadd(slots, {member: now + ttl})
        pipe.zcard(slots)
        pipe.expire(slots, int(ttl) + 1)
        _, _, count, _ = await pipe.execute()
    if count > settings.DELLM_MAX_STREAMS_PER_USER:
        # Two racing requests may both be refused at the edge, never both admitted.
        await async_redis_client().zrem(slots, member)
        return None
    return member


async def stream_slot_release(user_id: int, member: str) -> None:
    try:
        await async_redis_client().zrem(slots_key(user_id), member)
    except redis.RedisError:
        logger.warning("user %s: could not release a stream slot (it lapses on its own)", user_id)


class StreamRefused(Exception):
    """A stream that may not open now: 429 (every slot taken) or 503 (Redis unreachable).

    One refusal; each door words it in its own error shape (`/api/`:
    `api_response()`; `/v1`: assistant.completions_wire.stream_refusal).
    """

    def __init__(self, *, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = RETRY_AFTER

    def api_response(self) -> HttpResponseBase:
        return error(self.status, self.code, self.message, {"Retry-After": self.retry_after})


@dataclass(frozen=True)
class StreamSlot:
    """One of a user's stream slots, held until the stream it guards ends."""

    owner_id: int
    member: str

    async def release(self) -> None:
        await stream_slot_release(self.owner_id, self.member)

    def release_sync(self) -> None:
        """`release` for a stream served synchronously (WSGI)."""
        try:
            redis_client().zrem(slots_key(self.owner_id), self.member)
        except redis.RedisError:
            logger.warning("user %s: could not release a stream slot (it lapses on its own)", self.owner_id)

    async def releasing_async(self, events: AsyncIterator[str]) -> AsyncIterator[str]:
        """`events`, then the slot goes back: at the end, or when the server closes or cancels the stream."""
        try:
            async with aclosing(events) as parts:  # type: ignore[type-var]  # an async generator
                async for part in parts:
                    yield part
        finally:
            await self.release()

    def releasing_sync(self, events: Iterator[str]) -> Iterator[str]:
        try:
            with closing(events) as parts:  # type: ignore[type-var]  # a generator
                yield from parts
        finally:
            self.release_sync()


async def stream_slot_take(owner_id: int, *, what: str, instead: str) -> StreamSlot:
    """One of the owner's slots for a `what` stream, or StreamRefused; `instead` says what else the client may do."""
    try:
        member = await stream_slot_acquire(owner_id)
    except redis.RedisError as exc:
        logger.warning("user %s: Redis refused a %s stream (%s)", owner_id, what, type(exc).__name__)
        raise StreamRefused(
            status=503,
            code="service_unavailable",
            message="DeLLM cannot reach its event service right now; please try again.",
        ) from None
    if member is None:
        raise StreamRefused(
            status=429,
            code="throttled",
            message=f"At most {settings.DELLM_MAX_STREAMS_PER_USER} streams may be open at once; close one first "
            f"({instead}).",
        )
    return StreamSlot(owner_id=owner_id, member=member)


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
