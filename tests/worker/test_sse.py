import json

import httpx
import pytest

from dellm_site.auth import token_create
from tests.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def read_events(response) -> list[tuple[str, dict]]:
    events, name = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, json.loads(line.removeprefix("data: "))))
    return events


def test_events_stream_status_tokens_then_the_reply(start_worker, live_server, owner, thread):
    text = "Streaming works one word at a time, end to end."
    with FakeOpenAI(default_text=text, chunk_delay=0.15) as fake:
        start_worker({"DELLM_LLM": "openai", "OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "k"})
        client = httpx.Client(
            base_url=live_server.url, headers={"Authorization": f"Token {token_create(user=owner)[1]}"}
        )
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
    reply = events[-1][1]["turn"]["reply"]
    assert reply["content"] == text
    streamed = "".join(data["text"] for name, data in events if name == "token")
    assert streamed and text.endswith(streamed)


def test_events_of_another_users_turn_are_not_found(live_server, owner, other_owner, thread):
    from chat import services

    turn = services.turn_create(thread=thread, content="mine", enqueue=False)
    token = token_create(user=other_owner)[1]
    response = httpx.get(
        f"{live_server.url}/api/turns/{turn.pk}/events/",
        headers={"Authorization": f"Token {token}", "Accept": "text/event-stream"},
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
