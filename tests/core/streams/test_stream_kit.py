"""The event-stream kit (core/streams/): the one wait loop, its refusal, and that it is the only one."""

import ast
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError, ProgrammingError
from psycopg_pool import PoolTimeout

from assistant.openai.wire import stream_refusal
from core.streams.pubsub import publish, subscribe_sync
from core.streams.slots import StreamRefused, stream_slot_take
from core.streams.sse import PING_EVERY, EventStreamRenderer
from core.streams.wait import READ_AGAIN_AFTER, Watch, watch_async, watch_sync
from tests.helpers import ROOT, run_async

KIT = Path("core/streams")
# Every app whose code runs in DeLLM or beside it (the tests subscribe only to observe).
SCANNED = ("core", "assistant", "chat", "provenance", "dellm_site", "lab")
# Redis's pub/sub API: making a subscription, and reading one.
PUBSUB_CALLS = {"pubsub", "subscribe", "psubscribe", "ssubscribe", "get_message", "listen"}


def pubsub_calls(source: str) -> list[tuple[int, str]]:
    """(line, name) of every call of Redis's pub/sub API in `source`, as a method or a bare name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in PUBSUB_CALLS:
                found.append((node.lineno, name))
    return sorted(found)


def wait_loops_outside_the_kit(root: Path) -> dict[str, list[tuple[int, str]]]:
    found = {}
    for app in SCANNED:
        for path in sorted((root / app).rglob("*.py")):
            relative = path.relative_to(root)
            calls = pubsub_calls(path.read_text())
            if calls and KIT not in relative.parents:
                found[str(relative)] = calls
    return found


def test_the_checker_finds_a_planted_wait_loop_and_nothing_else(tmp_path):
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "relay.py").write_text(
        "from core.streams.pubsub import publish, subscribe_async\n"
        "def wait(client, channel):\n"
        "    pubsub = client.pubsub()\n"
        "    pubsub.subscribe(channel)\n"
        "    while pubsub.get_message(timeout=1.0) is None:\n"
        "        publish(channel, 'changed', {})\n"
        "    for message in pubsub.listen():\n"
        "        return message\n"
        "async def fine(channel):\n"
        "    return await subscribe_async(channel)\n"
    )
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "bench.py").write_text("from redis import Redis\nsubscribe = Redis().pubsub\nsubscribe()\n")
    assert wait_loops_outside_the_kit(tmp_path) == {
        "chat/relay.py": [(3, "pubsub"), (4, "subscribe"), (5, "get_message"), (7, "listen")],
        "lab/bench.py": [(3, "subscribe")],
    }


def test_the_kit_is_the_only_wait_loop():
    assert wait_loops_outside_the_kit(ROOT) == {}
    # The scan reads what the kit does, so it would see the same calls anywhere else.
    kit = {name for path in (ROOT / KIT).glob("*.py") for _, name in pubsub_calls(path.read_text())}
    assert kit == {"pubsub", "subscribe", "get_message"}


class FakeSubscription:
    """What the wait loop reads: queued messages, then nothing (a timed-out wait), recorded."""

    def __init__(self, *payloads: dict[str, Any]) -> None:
        self.queued = [{"type": "message", "data": json.dumps(payload).encode()} for payload in payloads]
        self.waits: list[float] = []
        self.closed = False

    def get_message(self, *, ignore_subscribe_messages: bool, timeout: float) -> dict[str, Any] | None:
        self.waits.append(timeout)
        return self.queued.pop(0) if self.queued else None

    def close(self) -> None:
        self.closed = True


class Counting(Watch[int]):
    """Sends every event's name and every state; over at state 3."""

    def opening(self) -> list[str]:
        return ["open"]

    def message(self, payload: dict[str, Any]) -> tuple[list[str], bool]:
        return [payload["event"]], payload["event"] == "changed"

    def state(self, state: int) -> tuple[list[str], bool]:
        return [f"state {state}"], state == 3

    def timeout(self) -> list[str]:
        return ["timeout"]


def loads(*states: int):
    remaining = list(states)
    return lambda: remaining.pop(0)


def clock(monkeypatch, step: float = 5.0) -> None:
    """Each reading of the loop's clock is `step` seconds after the one before."""
    ticks = iter(range(0, 100_000))
    monkeypatch.setattr("core.streams.wait.time.monotonic", lambda: next(ticks) * step)


def test_queued_messages_behind_a_change_cost_one_read_and_the_stream_ends_on_the_final_state(monkeypatch):
    clock(monkeypatch, step=1.0)
    subscription = FakeSubscription(
        {"event": "token"}, {"event": "changed"}, {"event": "changed"}, {"event": "token"}, {"event": "changed"}
    )
    parts = list(watch_sync(subscription, Counting(), load=loads(1, 3), timeout=60, recheck=30))  # type: ignore[arg-type]
    assert parts == ["open", "state 1", "token", "changed", "changed", "token", "changed", "state 3"]
    assert subscription.closed
    # Waits bounded by the next ping at 15 (the clock says 1, then 3); after a change, only what is already queued.
    assert subscription.waits == [14.0, 12.0, 0.0, 0.0, 0.0, 0.0]


def test_without_a_first_read_the_loop_waits_then_rechecks_and_times_out(monkeypatch):
    clock(monkeypatch)
    subscription = FakeSubscription()
    parts = list(
        watch_sync(subscription, Counting(), load=loads(1), timeout=12, recheck=7, read_first=False)  # type: ignore[arg-type]
    )
    # Started at 0: a wait until the recheck at 7, a read when the clock says 10, over at 15.
    assert (parts, subscription.waits, subscription.closed) == (["open", "state 1", "timeout"], [2.0], True)


def test_an_idle_stream_pings(monkeypatch):
    clock(monkeypatch)
    parts = list(watch_sync(FakeSubscription(), Counting(), load=loads(1), timeout=40, recheck=1e9))  # type: ignore[arg-type]
    assert PING_EVERY == 15
    assert parts == ["open", "state 1", EventStreamRenderer.PING, EventStreamRenderer.PING, "timeout"]


def saturated_then(*states: int):
    """A load whose first read finds every pooled connection busy (as Django raises it), then `states`."""
    remaining = list(states)
    failed = []

    def load() -> int:
        if not failed:
            failed.append(True)
            try:
                raise PoolTimeout("couldn't get a connection after 5.00 sec")
            except PoolTimeout as exc:
                raise OperationalError("couldn't get a connection") from exc
        return remaining.pop(0)

    return load


def test_a_read_on_a_saturated_database_keeps_the_stream_and_reads_again(monkeypatch, caplog):
    clock(monkeypatch)
    subscription = FakeSubscription()
    parts = list(watch_sync(subscription, Counting(), load=saturated_then(3), timeout=60, recheck=30))  # type: ignore[arg-type]
    # The clock moves 5 s a reading: the first read failed at 5, the next read is due at 10 (READ_AGAIN_AFTER),
    # not at the recheck (30); by the time the loop waits it is 15 (a ping), so it waits 0 s and reads.
    assert READ_AGAIN_AFTER == 5
    assert (parts, subscription.waits, subscription.closed) == (
        ["open", EventStreamRenderer.PING, "state 3"],
        [0.0],
        True,
    )
    assert "OperationalError sqlstate=none" in caplog.text


class FakeAsyncSubscription(FakeSubscription):
    async def get_message(self, *, ignore_subscribe_messages: bool, timeout: float) -> dict[str, Any] | None:  # type: ignore[override]
        return super().get_message(ignore_subscribe_messages=ignore_subscribe_messages, timeout=timeout)

    async def aclose(self) -> None:
        self.closed = True


def test_a_served_stream_on_a_saturated_database_reads_again_instead_of_failing(monkeypatch):
    clock(monkeypatch)
    subscription = FakeAsyncSubscription({"event": "token"})
    load = saturated_then(1, 3)

    async def read() -> int:
        return load()

    async def collect() -> list[str]:
        return [part async for part in watch_async(subscription, Counting(), load=read, timeout=60, recheck=30)]  # type: ignore[arg-type]

    # The read after the queued token failed; the next one, READ_AGAIN_AFTER later, found state 1.
    parts = run_async(collect)
    assert parts == ["open", "token", EventStreamRenderer.PING, "state 1", EventStreamRenderer.PING, "state 3"]
    assert subscription.closed


def test_a_read_that_fails_for_another_reason_still_ends_the_stream(monkeypatch):
    clock(monkeypatch)

    def broken() -> int:
        raise ProgrammingError("relation does not exist")

    with pytest.raises(ProgrammingError):
        list(watch_sync(FakeSubscription(), Counting(), load=broken, timeout=60, recheck=30))  # type: ignore[arg-type]


def test_a_real_subscription_receives_what_is_published_after_it():
    name = f"dellm-test-kit-{uuid.uuid4().hex}"
    subscription = subscribe_sync(name)
    received = []

    def first_state() -> int:
        # Published after the subscription was confirmed: never missed.
        assert publish(name, "changed", {"id": 1})
        received.append("published")
        return 1 if len(received) == 1 else 3

    parts = list(watch_sync(subscription, Counting(), load=first_state, timeout=10, recheck=60))
    assert parts == ["open", "state 1", "changed", "state 3"]


def test_the_frames():
    assert (
        EventStreamRenderer.event("status", {"status": "pending"}) == 'event: status\ndata: {"status": "pending"}\n\n'
    )
    assert EventStreamRenderer.data({"a": 1}) == 'data: {"a": 1}\n\n'
    assert EventStreamRenderer().render({"error": {"code": "x"}}) == b'{"error": {"code": "x"}}'


@pytest.mark.django_db
def test_one_refusal_beyond_the_cap_in_each_doors_words(owner, settings):
    settings.DELLM_MAX_STREAMS_PER_USER = 1
    take = async_to_sync(stream_slot_take)
    held = take(owner.pk, what="turn", instead="or poll the turn")
    try:
        with pytest.raises(StreamRefused) as refused:
            take(owner.pk, what="turn", instead="or poll the turn")
    finally:
        async_to_sync(held.release)()
    message = "At most 1 streams may be open at once; close one first (or poll the turn)."
    response = refused.value.api_response()
    assert (response.status_code, json.loads(response.content), response["Retry-After"]) == (
        429,
        {"error": {"code": "throttled", "message": message, "fields": {}}},
        "5",
    )
    completion = stream_refusal(refused.value)
    assert (completion.status, completion.body(), completion.headers) == (
        429,
        {"error": {"message": message, "type": "requests", "param": None, "code": "rate_limit_exceeded"}},
        {"Retry-After": "5"},
    )
    # Released: the next one is admitted.
    again = take(owner.pk, what="turn", instead="or poll the turn")
    async_to_sync(again.release)()


def test_a_stream_closed_early_still_closes_its_subscription():
    subscription = FakeSubscription({"event": "token"})
    stream = watch_sync(subscription, Counting(), load=loads(1), timeout=60, recheck=30)  # type: ignore[arg-type]
    assert [next(stream), next(stream)] == ["open", "state 1"]
    stream.close()  # type: ignore[attr-defined]
    assert subscription.closed
