"""The OpenAI-compatible endpoint driven by the official `openai` client, a real worker and a fake upstream model.

The fake upstream (tests/fake_openai.py) records every prompt DeLLM sends it,
so these tests assert exactly what the model saw.
"""

import threading

import httpx
import openai
import pytest

from chat.models import ContextEdge, Message, Turn
from core.auth.tokens import token_create
from core.streams.pubsub import redis_client
from core.streams.slots import slots_key
from dellm_site.celery import app as celery_app
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from tests.fake_openai import FakeOpenAI
from tests.helpers import pg_dump, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SYSTEM = "Answer in one sentence. Client instruction 7f3a."
FACT = "I live in Lyon and my cat is called Zorglub."


@pytest.fixture
def upstream(start_worker):
    """The model behind DeLLM: a fake OpenAI server that records every prompt it gets."""
    with FakeOpenAI(default_text="A reply.", chunk_delay=0.02) as fake:
        start_worker({"DELLM_LLM": "openai", "OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "k"})
        yield fake


@pytest.fixture
def token(owner) -> str:
    return token_create(user=owner)[1]


@pytest.fixture
def asgi_url(upstream, asgi_server) -> str:
    """uvicorn serving the app (tests/helpers.py AsgiServer), sending turns to `upstream`'s worker."""
    return asgi_server({"DELLM_CELERY_QUEUE": celery_app.conf.task_default_queue}).url


def prompts(fake: FakeOpenAI) -> list[list[dict]]:
    """The `messages` of every chat completion DeLLM asked of the model, in order."""
    return [r["body"]["messages"] for r in fake.requests if r["path"].endswith("/chat/completions")]


def streamed(client: openai.OpenAI, messages: list[dict]) -> tuple[str, dict]:
    """Stream a completion with the official client: (the text, the `dellm` field of the last chunk)."""
    chunks = list(client.chat.completions.create(model="dellm", messages=messages, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks] == [None] * (len(chunks) - 1) + ["stop"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    return text, chunks[-1].model_extra["dellm"]


def test_a_forgotten_memory_stays_forgotten_when_the_client_replays_its_transcript(upstream, asgi_url, owner, token):
    client = openai.OpenAI(base_url=f"{asgi_url}/v1", api_key=token, max_retries=0, timeout=60)
    system = {"role": "system", "content": SYSTEM}
    transcript = [system, {"role": "user", "content": FACT}]

    upstream.script = [("ok", "Noted, Lyon and Zorglub.")]
    first, first_ids = streamed(client, transcript)
    assert first == "Noted, Lyon and Zorglub."
    fact = Message.objects.get(pk=first_ids["message_id"])
    assert fact.content == FACT

    # The same question twice: the first time the memory answers it.
    transcript += [{"role": "assistant", "content": first}, {"role": "user", "content": "Where do I live?"}]
    upstream.script = [("ok", "You live in Lyon.")]
    answer, used = streamed(client, transcript)
    assert answer == "You live in Lyon."
    assert used["thread_id"] == first_ids["thread_id"]
    assert (used["stored"], used["dropped"]) == (0, 0)
    assert fact.pk in used["context"]
    assert FACT in prompts(upstream)[-1][-1]["content"]

    # Forgotten in DeLLM: a purge of the fact, through the API, takes the replies derived from it along.
    api = httpx.Client(base_url=asgi_url, headers={"Authorization": f"Token {token}"})
    preview = api.post("/api/deletions/", json={"select": {"ids": [fact.pk]}, "mode": "purge"}).json()
    assert sorted(preview["dependents"]) == sorted([first_ids["reply_id"], used["reply_id"]])
    assert api.post(f"/api/deletions/{preview['id']}/confirm/").json()["status"] == "executed"

    # The client still holds the whole transcript, the forgotten text included, and replays it.
    transcript += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Where do I live?"}]
    upstream.script = [("ok", "I don't know where you live.")]
    again, after = streamed(client, transcript)
    assert again == "I don't know where you live."
    # Same thread (found through its live question), the three removed messages recognised by
    # position and dropped, nothing of the transcript stored again.
    assert after["thread_id"] == first_ids["thread_id"]
    assert (after["stored"], after["dropped"]) == (0, 3)
    seen = prompts(upstream)[-1]
    assert [m["role"] for m in seen] == ["system", "system", "user"]
    assert seen[1]["content"] == SYSTEM
    assert all("Lyon" not in m["content"] and "Zorglub" not in m["content"] for m in seen)
    assert fact.pk not in after["context"]
    # Everything that did reach the model is a stored, live message with an edge to the reply,
    # the client's system prompt included: one stored node, reused by every turn that sent it.
    prompt = Message.objects.get(owner=owner, role="system")
    assert (prompt.content, prompt.status, prompt.embedding) == (SYSTEM, "active", None)
    assert first_ids["system_message_id"] == used["system_message_id"] == after["system_message_id"] == prompt.pk
    reply = Message.objects.get(pk=after["reply_id"])
    sources = {e.source_id for e in reply.in_edges.all()}
    assert sources == {after["message_id"], prompt.pk, *after["context"]}
    assert all(m.is_live for m in Message.objects.filter(pk__in=sources))
    # Nothing came back as memory.
    assert not Message.objects.filter(content__contains="Zorglub").exists()
    assert Message.objects.filter(owner=owner, status="purged").count() == 3
    assert "Zorglub" not in pg_dump()

    # Asked to forget it again from the client: nothing left to match, and the request is not stored.
    transcript += [{"role": "assistant", "content": again}, {"role": "user", "content": "Forget that I live in Lyon"}]
    answer, preview = streamed(client, transcript)
    assert answer == (
        "Nothing in your DeLLM memory matches this request, so nothing would be deleted. (This request was not stored.)"
    )
    assert preview["thread_id"] is None
    assert not Message.objects.filter(content__contains="Forget").exists()


PROMPT_FACT = "You assist Dana. Dana's locker code is Kestrel-4471."


def test_a_system_prompt_is_a_stored_node_and_leaves_with_the_replies_it_shaped(upstream, asgi_url, owner, token):
    client = openai.OpenAI(base_url=f"{asgi_url}/v1", api_key=token, max_retries=0, timeout=60)
    upstream.script = [("ok", "Your locker code is Kestrel-4471.")]
    question = {"role": "user", "content": "What is my locker code?"}
    text, shaped = streamed(client, [{"role": "developer", "content": PROMPT_FACT}, question])
    assert text == "Your locker code is Kestrel-4471."
    # The model saw the prompt, and the prompt is a stored node with an edge to the reply it shaped.
    seen = prompts(upstream)[-1]
    assert [m["role"] for m in seen] == ["system", "system", "user"]
    assert seen[1]["content"] == PROMPT_FACT
    prompt = Message.objects.get(pk=shaped["system_message_id"])
    assert (prompt.role, prompt.content, prompt.thread_id) == ("system", PROMPT_FACT, shaped["thread_id"])
    edges = ContextEdge.objects.filter(target_id=shaped["reply_id"]).order_by("rank")
    assert list(edges.values_list("source_id", "rank", "signal")) == [
        (shaped["message_id"], 0, ""),
        (prompt.pk, 1, "system"),
    ]
    # `context` lists memories only: the prompt is not one.
    assert shaped["context"] == []

    # A later conversation without the prompt whose question has the prompt's very words: the
    # prompt is never retrieved (the reply it shaped is a memory, and is).
    upstream.script = [("ok", "Kestrel-4471, as I said.")]
    _, later = streamed(client, [{"role": "user", "content": "Dana's locker code?"}])
    assert later["system_message_id"] is None
    assert shaped["reply_id"] in later["context"]
    assert prompt.pk not in later["context"]
    assert not ContextEdge.objects.filter(source=prompt, target_id=later["reply_id"]).exists()
    assert all(m["content"] != PROMPT_FACT for m in prompts(upstream)[-1])

    # Purging the prompt node removes every reply it shaped, and what derived from them.
    api = httpx.Client(base_url=asgi_url, headers={"Authorization": f"Token {token}"})
    preview = api.post("/api/deletions/", json={"select": {"ids": [prompt.pk]}, "mode": "purge"}).json()
    assert sorted(preview["dependents"]) == sorted([shaped["reply_id"], later["reply_id"]])
    assert api.post(f"/api/deletions/{preview['id']}/confirm/").json()["status"] == "executed"
    assert not Message.objects.filter(content__icontains="Kestrel").exists()
    assert "Kestrel" not in pg_dump()


def test_a_client_that_goes_away_mid_stream_still_gets_the_whole_reply_stored(upstream, asgi_url, owner, token):
    text = "one two three four five six seven eight nine ten eleven twelve"
    upstream.script = [("ok", text)]
    upstream.chunk_delay = 0.1
    with httpx.Client(base_url=asgi_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        body = {"model": "dellm", "messages": [{"role": "user", "content": "Count for me."}], "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            turn_id = int(response.headers["X-DeLLM-Turn"])
            for line in response.iter_lines():
                if '"content": "two ' in line:
                    break
    turn = wait_for(lambda: Turn.objects.filter(pk=turn_id, status="done").first())
    assert turn.reply.content == text
    assert Message.objects.filter(owner=owner, role="assistant").count() == 1
    # The stream's slot went back when the client did (chat/turns/stream.py, the per-user cap).
    assert wait_for(lambda: redis_client().zcard(slots_key(owner.pk)) == 0)


def test_a_waiting_non_streaming_completion_holds_a_stream_slot(upstream, asgi_server, owner, token):
    """a completion without `stream` waits as long as a stream stays open, so it takes a slot."""
    url = asgi_server({"DELLM_CELERY_QUEUE": celery_app.conf.task_default_queue, "DELLM_MAX_STREAMS_PER_USER": "2"}).url
    upstream.gate = threading.Event()
    body = {"model": "dellm", "messages": [{"role": "user", "content": "Take your time."}]}
    answers: list[int] = []

    def ask() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            answers.append(http.post("/v1/chat/completions", json=body).status_code)

    waiting = [threading.Thread(target=ask) for _ in range(2)]
    for thread in waiting:
        thread.start()
    try:
        assert wait_for(lambda: redis_client().zcard(slots_key(owner.pk)) == 2)
        # Answered at once while two wait: before, the first waiting completion held the one thread the
        # process's long-lived requests share (a sync-only middleware), and this one queued behind it.
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            third = http.post("/v1/chat/completions", json=body)
    finally:
        upstream.gate.set()
        for thread in waiting:
            thread.join(60)
    assert third.status_code == 429
    assert third.headers["Retry-After"] == "5"
    assert third.json()["error"] == {
        "message": "At most 2 streams may be open at once; close one first "
        "(a request waiting for its answer holds one too).",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert answers == [200, 200]
    # The refused request stored nothing; the answered ones gave their slots back.
    assert Turn.objects.filter(owner=owner).count() == 2
    assert wait_for(lambda: redis_client().zcard(slots_key(owner.pk)) == 0)


def test_non_streaming_completion_carries_the_memories_it_used(upstream, live_server, owner, token):
    """Also under WSGI (live_server): the same view waits on the request's thread."""
    # Closed at the end: the server's request thread (and its database connection) lives as long as the client's.
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=token, max_retries=0) as client:
        second, raw, first = _ask_twice(client, upstream)
    dellm = second.model_extra["dellm"]
    assert second.object == "chat.completion"
    assert second.choices[0].message.content == "Zorglub."
    assert second.choices[0].finish_reason == "stop"
    assert dellm["thread_id"] == first.model_extra["dellm"]["thread_id"]
    assert dellm["context"][0] == first.model_extra["dellm"]["message_id"]
    assert raw.headers["X-DeLLM-Context"] == ",".join(str(pk) for pk in dellm["context"])
    assert raw.headers["X-DeLLM-Reply"] == str(dellm["reply_id"])
    assert raw.headers["X-DeLLM-Thread"] == str(dellm["thread_id"])
    # The client's copy of the first exchange was matched, not stored twice.
    assert list(Message.objects.filter(owner=owner).values_list("role", flat=True)) == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


PIN = "My bank PIN hint is ORCHID-5150."


def test_a_client_reply_quoting_a_purged_message_is_never_stored_live(upstream, live_server, owner, token):
    """The reproduction: transcript [u1, a1, u2, a2, u3, a3, u4], u1 purged in DeLLM, and a3 the
    client's own reply (another model, which still saw u1) quoting it: a3 derives from u1 and is dropped."""
    u1 = {"role": "user", "content": PIN}
    u2 = {"role": "user", "content": "How do I get to the station?"}
    with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=token, max_retries=0) as client:
        upstream.script = [("ok", "Noted."), ("ok", "Take the number 7 tram."), ("ok", "I do not know.")]
        first = client.chat.completions.create(model="dellm", messages=[u1]).model_extra["dellm"]
        a1 = {"role": "assistant", "content": "Noted."}
        second = client.chat.completions.create(model="dellm", messages=[u1, a1, u2]).model_extra["dellm"]
        # The precondition that makes this the bug: the second reply did not use u1, so it stays live.
        assert first["message_id"] not in second["context"]
        deletion = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[first["message_id"]])
        assert deletion.dependent_ids == [first["reply_id"]]
        deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)

        transcript = [
            u1,
            a1,
            u2,
            {"role": "assistant", "content": "Take the number 7 tram."},
            {"role": "user", "content": "And my PIN hint?"},
            {"role": "assistant", "content": "Use ORCHID-5150, the hint you gave me, to recall your PIN."},
            {"role": "user", "content": "Thanks, what else do you remember?"},
        ]
        last = client.chat.completions.create(model="dellm", messages=transcript)
    dellm = last.model_extra["dellm"]
    assert dellm["thread_id"] == first["thread_id"]
    # u1 and a1 dropped as removed positions, a3 because it derives from them; u3 stored.
    assert (dellm["stored"], dellm["dropped"]) == (1, 3)
    assert not Message.objects.filter(status__in=Message.LIVE, content__contains="ORCHID").exists()
    assert list(Message.objects.filter(thread_id=first["thread_id"]).values_list("role", "status", "content")) == [
        ("user", "purged", ""),
        ("assistant", "purged", ""),
        ("user", "active", u2["content"]),
        ("assistant", "active", "Take the number 7 tram."),
        ("user", "active", "And my PIN hint?"),
        ("user", "active", "Thanks, what else do you remember?"),
        ("assistant", "active", "I do not know."),
    ]
    assert all("ORCHID" not in m["content"] for m in prompts(upstream)[-1])


def _ask_twice(client: openai.OpenAI, upstream: FakeOpenAI):
    upstream.script = [("ok", "Noted."), ("ok", "Zorglub.")]
    first = client.chat.completions.create(model="dellm", messages=[{"role": "user", "content": FACT}])
    raw = client.chat.completions.with_raw_response.create(
        model="dellm",
        messages=[
            {"role": "user", "content": FACT},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": [{"type": "text", "text": "What is my cat called?"}]},
        ],
    )
    return raw.parse(), raw, first
