"""The turn stream, served by uvicorn as in production (chat/turns/stream_view.py)."""

import json
import threading
from contextlib import ExitStack

import httpx
import pytest

from chat.models import Turn
from chat.turns.start import turn_create
from chat.turns.stream import turn_publish
from core.auth.tokens import token_create
from core.streams.pubsub import redis_client
from core.streams.slots import slots_key
from tests.fake_openai import FakeOpenAI
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def read_events(response, limit: int | None = None, lines=None) -> list[tuple[str, dict]]:
    """The events of a stream, or its first `limit` ones (then keep `lines`: a dropped iterator closes the stream)."""
    events, name = [], None
    for line in lines if lines is not None else response.iter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, json.loads(line.removeprefix("data: "))))
            if limit is not None and len(events) >= limit:
                break
    return events


def client_for(server, user) -> httpx.Client:
    token = token_create(user=user)[1]
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=30)


def test_events_stream_status_tokens_then_the_reply(start_worker, asgi_server, owner, thread):
    text = "Streaming works one word at a time, end to end."
    with FakeOpenAI(default_text=text, chunk_delay=0.15) as fake:
        worker = start_worker({"DELLM_LLM": "openai", "OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "k"})
        client = client_for(asgi_server({"DELLM_CELERY_QUEUE": worker.queue}), owner)
        posted = client.post(f"/api/threads/{thread.pk}/messages/", json={"content": "Say something."})
        assert posted.status_code == 202
        turn_id = posted.json()["turn"]["id"]
        with client.stream("GET", f"/api/turns/{turn_id}/events/", timeout=60) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            events = read_events(response)

    names = [name for name, _ in events]
    assert names[-1] == "reply"
    assert "token" in names
    assert set(names) <= {"status", "token", "reset", "reply"}
    assert ("status", {"status": "running"}) in events
    reply = events[-1][1]["turn"]["reply"]
    assert reply["content"] == text
    streamed = "".join(data["text"] for name, data in events if name == "token")
    assert streamed and text.endswith(streamed)


def test_events_of_another_users_turn_are_not_found(asgi_server, owner, other_owner, thread):
    turn = turn_create(thread=thread, content="mine", enqueue=False)
    response = client_for(asgi_server(), other_owner).get(
        f"/api/turns/{turn.pk}/events/", headers={"Accept": "text/event-stream"}
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_events_without_credentials_are_401_with_a_challenge(asgi_server, owner, thread):
    turn = turn_create(thread=thread, content="mine", enqueue=False)
    server = asgi_server()
    anonymous = httpx.get(f"{server.url}/api/turns/{turn.pk}/events/")
    bad_token = httpx.get(f"{server.url}/api/turns/{turn.pk}/events/", headers={"Authorization": "Token nope"})

    assert (anonymous.status_code, anonymous.json()["error"]["code"]) == (401, "not_authenticated")
    assert anonymous.headers["WWW-Authenticate"] == "Token"
    assert (bad_token.status_code, bad_token.json()["error"]["code"]) == (401, "authentication_failed")


def test_open_streams_hold_no_database_connection_and_no_thread(asgi_server, owner, thread):
    """Ten streams wait on a server whose pool has one connection, and the API still answers."""
    server = asgi_server({"DELLM_DB_POOL_MAX": "1", "DELLM_DB_POOL_TIMEOUT": "3", "DELLM_MAX_STREAMS_PER_USER": "20"})
    turns = [turn_create(thread=thread, content=f"waiting {i}", enqueue=False) for i in range(11)]
    client = client_for(server, owner)
    with ExitStack() as stack:
        open_lines = []
        for turn in turns:
            response = stack.enter_context(client.stream("GET", f"/api/turns/{turn.pk}/events/"))
            open_lines.append(response.iter_lines())
            assert read_events(response, limit=1, lines=open_lines[-1]) == [("status", {"status": "pending"})]
            if len(open_lines) == 1:
                threads_with_one = server.threads()
        threads_with_eleven = server.threads()
        detail = client.get(f"/api/turns/{turns[0].pk}/")
        # Every stream is still open and waiting: the turn's outcome reaches each of them.
        Turn.objects.filter(pk__in=[turn.pk for turn in turns]).update(status=Turn.Status.FAILED, error="stopped")
        for turn in turns:
            turn_publish(turn.pk, "changed", {})
        outcomes = [read_events(None, lines=lines) for lines in open_lines]

    assert detail.status_code == 200
    assert [[name for name, _ in events] for events in outcomes] == [["failed"]] * 11
    # asgiref's executor may add a thread or two for the short database steps; not one per stream.
    assert threads_with_eleven - threads_with_one < 5


def test_streams_beyond_the_cap_get_a_json_429_and_closed_ones_free_their_slot(asgi_server, owner, thread):
    server = asgi_server({"DELLM_MAX_STREAMS_PER_USER": "2"})
    turns = [turn_create(thread=thread, content=f"waiting {i}", enqueue=False) for i in range(3)]
    client = client_for(server, owner)
    with ExitStack() as stack:
        open_lines = []
        for turn in turns[:2]:
            response = stack.enter_context(client.stream("GET", f"/api/turns/{turn.pk}/events/"))
            open_lines.append(response.iter_lines())
            assert read_events(response, limit=1, lines=open_lines[-1]) == [("status", {"status": "pending"})]
        refused = client.get(f"/api/turns/{turns[2].pk}/events/")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "throttled"
    assert refused.headers["Retry-After"] == "5"

    # The server gives a slot back when it sees the client go, a moment after the client closes.
    assert wait_for(lambda: redis_client().zcard(slots_key(owner.pk)) == 0)
    Turn.objects.filter(pk=turns[2].pk).update(status=Turn.Status.FAILED, error="stopped")
    with client.stream("GET", f"/api/turns/{turns[2].pk}/events/") as again:
        assert [name for name, _ in read_events(again)] == ["failed"]


def test_an_outcome_committed_right_after_the_first_read_still_arrives(owner, thread, monkeypatch, settings):
    """The stream subscribes before it reads the turn, so a change between the two is announced, not lost."""
    from asgiref.sync import async_to_sync, sync_to_async
    from django.test import AsyncClient

    from chat.turns import stream_view

    settings.DELLM_SSE_TIMEOUT = 10
    settings.DELLM_SSE_RECHECK = 60
    turn = turn_create(thread=thread, content="racing", enqueue=False)
    token = token_create(user=owner)[1]
    read = stream_view._turn_state
    reads = []

    def finish() -> None:
        Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.FAILED, error="stopped")
        turn_publish(turn.pk, "changed", {})

    async def read_then_finish(owner, turn_id: int):
        state = await read(owner, turn_id)
        reads.append(state[0])
        if len(reads) == 1:
            await sync_to_async(finish)()
        return state

    monkeypatch.setattr(stream_view, "_turn_state", read_then_finish)

    async def stream() -> str:
        response = await AsyncClient().get(f"/api/turns/{turn.pk}/events/", headers={"Authorization": f"Token {token}"})
        return b"".join([chunk async for chunk in response.streaming_content]).decode()

    # On a thread of its own: the main thread may already run an event loop (Playwright's, in a full run).
    result = {}
    runner = threading.Thread(target=lambda: result.setdefault("body", async_to_sync(stream)()))
    runner.start()
    runner.join(30)
    body = result["body"]
    names = [line.removeprefix("event: ") for line in body.splitlines() if line.startswith("event: ")]
    assert reads == ["pending", "failed"]
    assert names == ["status", "failed"]
