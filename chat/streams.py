"""Live turn events between the worker and the SSE endpoint, over Redis pub/sub.

Tokens of a reply being generated travel on a per-turn channel. Pub/sub is
fire-and-forget: nothing is stored in Redis, so a purge leaves no residue
there; a subscriber that joins late just gets the final reply from the
database. Publishing never fails a turn.
"""

import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator

import redis
from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)


@functools.cache
def _client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2)


def channel(turn_id: int) -> str:
    """The turn's channel, namespaced by the database the turn lives in.

    Turn ids are only unique within one database, and one Redis may serve
    several DeLLM databases (a staging and a production site, test runs side
    by side): without the namespace, a subscriber to turn 1 would also receive
    the tokens of every other database's turn 1, another user's reply text.
    Web and worker read the same database settings, so they agree on it.
    """
    db = connection.settings_dict
    namespace = hashlib.sha256(f"{db.get('HOST') or ''}/{db.get('NAME') or ''}".encode()).hexdigest()[:16]
    return f"dellm:{namespace}:turn:{turn_id}"


def turn_publish(turn_id: int, event: str, data: dict) -> None:
    try:
        _client().publish(channel(turn_id), json.dumps({"event": event, "data": data}))
    except redis.RedisError:
        logger.warning("turn %s: could not publish a %s event", turn_id, event)


def turn_subscribe(turn_id: int) -> redis.client.PubSub:
    pubsub = _client().pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(channel(turn_id))
    return pubsub


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def turn_event_stream(
    *, load: Callable[[], tuple[str, dict]], turn_id: int, timeout: float, poll: float = 0.5
) -> Iterator[str]:
    """Server-Sent Events for one turn: status changes, tokens, then the outcome.

    `load()` returns the turn's current status and its JSON. The channel is
    subscribed before the first read, so an outcome committed in between is
    never missed; tokens that were published before the subscription are not
    replayed, since the final `reply` event carries the whole text.
    """
    pubsub = turn_subscribe(turn_id)
    try:
        last_status = None
        deadline = time.monotonic() + timeout
        next_ping = time.monotonic() + 15
        while time.monotonic() < deadline:
            status, body = load()
            if status != last_status:
                last_status = status
                if status in ("done", "failed"):
                    yield sse("reply" if status == "done" else "failed", {"turn": body})
                    return
                yield sse("status", {"status": status})
            message = pubsub.get_message(timeout=poll)
            while message is not None:
                payload = json.loads(message["data"])
                if payload["event"] in ("token", "reset"):
                    yield sse(payload["event"], payload["data"])
                message = pubsub.get_message(timeout=0)
            if time.monotonic() >= next_ping:
                next_ping = time.monotonic() + 15
                yield ": ping\n\n"
        yield sse("timeout", {"status": last_status})
    finally:
        pubsub.close()
