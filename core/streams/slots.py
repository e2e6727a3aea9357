"""Stream slots: at most DELLM_STREAMS_PER_USER open event streams per user, held in Redis."""

import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, closing
from dataclasses import dataclass
from typing import TypeVar

import redis
import redis.asyncio
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.http.response import HttpResponseBase

from core.api.async_auth import error
from core.redis_ns import key
from core.streams.pubsub import async_redis_client, redis_client

logger = logging.getLogger(__name__)
U = TypeVar("U", bound=AbstractBaseUser)
RETRY_AFTER = 5


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
    `api_response()`; `/v1`: assistant.openai.wire.stream_refusal).
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
