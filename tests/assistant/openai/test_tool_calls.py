"""Tool calls through `/v1`: the official `openai` client, a real worker and a fake upstream that calls a tool.

The model (tests/fake_openai.py) asks for the client's `get_weather` tool; the
client runs it and sends the result back; the model answers. Every step is a
stored node: memory -> tool call -> result -> answer, and forgetting the
memory takes them all, for good.
"""

import json

import httpx
import openai
import pytest

from chat.models import ContextEdge, Message, Turn
from chat.turns.tool_offers import tools_key
from core.auth.tokens import token_create
from core.streams.pubsub import redis_client
from tests.fake_openai import FakeOpenAI
from tests.helpers import pg_dump

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

FACT = "I live in Grenoble-Zephyrine, near the river."
QUESTION = "What is the weather where I live?"
# The offline responder's acknowledgement of FACT: what it understood, not the words again.
NOTED = "Noted — home city: you live in Grenoble-Zephyrine, near the river."
ARGUMENTS = '{"city": "Grenoble-Zephyrine"}'
RESULT = "Sunny-Quokka, 21 C"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


@pytest.fixture
def upstream(start_worker):
    with FakeOpenAI(default_text="A reply.") as fake:
        start_worker({"DELLM_LLM": "openai", "OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "k"})
        yield fake


@pytest.fixture
def token(owner) -> str:
    return token_create(user=owner)[1]


@pytest.fixture
def asgi_url(upstream, asgi_server) -> str:
    from dellm_site.celery import app as celery_app

    return asgi_server({"DELLM_CELERY_QUEUE": celery_app.conf.task_default_queue}).url


def chat_requests(fake: FakeOpenAI) -> list[dict]:
    return [r["body"] for r in fake.requests if r["path"].endswith("/chat/completions")]


def streamed(client: openai.OpenAI, messages: list[dict], **kwargs) -> tuple[str, list[dict], str, dict]:
    """(text, tool calls assembled from their fragments, finish_reason, dellm) of a streamed completion."""
    chunks = list(client.chat.completions.create(model="dellm", messages=messages, stream=True, **kwargs))
    calls: dict[int, dict] = {}
    for chunk in chunks:
        for fragment in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
            call["id"] = fragment.id or call["id"]
            call["name"] += fragment.function.name or ""
            call["arguments"] += fragment.function.arguments or ""
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    return text, [calls[i] for i in sorted(calls)], chunks[-1].choices[0].finish_reason, chunks[-1].model_extra["dellm"]


def test_a_tool_call_reaches_the_client_its_result_goes_back_and_forgetting_the_memory_takes_them_all(
    upstream, asgi_url, owner, token
):
    client = openai.OpenAI(base_url=f"{asgi_url}/v1", api_key=token, max_retries=0, timeout=60)
    upstream.script = [("ok", "Noted.")]
    transcript = [{"role": "user", "content": FACT}]
    noted, _, _, first = streamed(client, transcript)
    fact = Message.objects.get(pk=first["message_id"])

    # The model calls the client's tool; the call streams as OpenAI streams it, in fragments.
    transcript += [{"role": "assistant", "content": noted}, {"role": "user", "content": QUESTION}]
    upstream.script = [("tools", [("call_w1", "get_weather", ARGUMENTS)])]
    text, calls, finish, asked = streamed(client, transcript, tools=TOOLS, tool_choice="auto")
    assert (text, finish) == ("", "tool_calls")
    assert calls == [{"id": "call_w1", "name": "get_weather", "arguments": ARGUMENTS}]
    sent = chat_requests(upstream)[-1]
    assert (sent["tools"], sent["tool_choice"]) == (TOOLS, "auto")
    assert FACT in sent["messages"][-1]["content"]
    call = Message.objects.get(pk=asked["reply_id"])
    assert (call.role, call.content, call.embedding) == ("assistant", "", None)
    assert call.tool_calls == [{"id": "call_w1", "name": "get_weather", "arguments": ARGUMENTS}]
    assert fact.pk in asked["context"]
    # The tools were held for the turn only, in Redis, and are gone now; no row holds them.
    assert redis_client().get(tools_key(asked["turn_id"])) is None
    assert "The weather in a city." not in pg_dump()

    # The client runs the tool and sends the result back: the answer streams.
    transcript += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": ARGUMENTS}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": RESULT},
    ]
    upstream.script = [("ok", "It is sunny where you live.")]
    answer, calls, finish, answered = streamed(client, transcript, tools=TOOLS)
    assert (answer, calls, finish) == ("It is sunny where you live.", [], "stop")
    assert answered["thread_id"] == first["thread_id"]
    # The model saw the memory, its own call and the client's result.
    seen = chat_requests(upstream)[-1]["messages"]
    assert [m["role"] for m in seen] == ["system", "user", "assistant", "tool"]
    assert FACT in seen[1]["content"]
    assert seen[2]["tool_calls"][0]["id"] == "call_w1"
    assert (seen[3]["tool_call_id"], seen[3]["content"]) == ("call_w1", RESULT)
    result = Message.objects.get(owner=owner, role="tool")
    assert (result.content, result.tool_call_id, result.embedding) == (RESULT, "call_w1", None)
    assert Turn.objects.get(pk=answered["turn_id"]).tool_call_id == call.pk

    # The graph: memory -> tool call -> result -> answer, the tool steps drawn as such.
    api = httpx.Client(base_url=asgi_url, headers={"Authorization": f"Token {token}"})
    graph = api.get("/api/graph/", params={"thread": first["thread_id"]}).json()
    edges = {(e["data"]["source"], e["data"]["target"]): e["data"]["signal"] for e in graph["edges"]}
    reply = answered["reply_id"]
    assert edges[(call.pk, result.pk)] == "tool"
    assert edges[(result.pk, reply)] == "tool"
    assert (fact.pk, call.pk) in edges
    steps = {n["data"]["id"]: n["data"]["tool_step"] for n in graph["nodes"]}
    assert (steps[call.pk], steps[result.pk], steps[reply], steps[fact.pk]) == ("call", "result", None, None)
    assert ContextEdge.objects.filter(target_id=result.pk).count() == 1

    # Forgetting the memory takes the call, its result and the answer; the preview names them as tool steps,
    # and says regenerating would not rewrite them.
    preview = api.post(
        "/api/deletions/", json={"select": {"ids": [fact.pk]}, "mode": "purge", "derived": "regenerate"}
    ).json()
    assert {call.pk, result.pk, reply} <= set(preview["dependents"])
    assert preview["tool_steps"] == [
        {"id": call.pk, "kind": "call"},
        {"id": result.pk, "kind": "result"},
        {"id": reply, "kind": "answer"},
    ]
    assert not {call.pk, result.pk, reply} & set(preview["regenerate"])
    # Confirmed without rewriting ("Noted." would be): the replay below gets the model to itself.
    confirmed = api.post(f"/api/deletions/{preview['id']}/confirm/", json={"derived": "delete"}).json()
    assert confirmed["status"] == "executed"
    call.refresh_from_db()
    assert (call.status, call.content, call.tool_calls) == ("purged", "", [])
    for message in (result, Message.objects.get(pk=reply)):
        message.refresh_from_db()
        assert (message.status, message.content, message.tool_calls, message.tool_call_id) == ("purged", "", None, "")

    # The client replays everything, the call and its result included: neither comes back.
    transcript += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And tomorrow?"}]
    upstream.script = [("ok", "I don't know.")]
    again, _, _, after = streamed(client, transcript, tools=TOOLS)
    assert again == "I don't know."
    assert after["thread_id"] == first["thread_id"]
    # The question stays (the user's own words); the fact, "Noted.", the call, its result and the answer are
    # removed positions: dropped, whatever the replayed text.
    assert (after["stored"], after["dropped"]) == (0, 5)
    prompt = json.dumps(chat_requests(upstream)[-1]["messages"])
    assert RESULT not in prompt and "Zephyrine" not in prompt
    assert not Message.objects.filter(owner=owner, status__in=Message.LIVE, role="tool").exists()
    assert Message.objects.filter(owner=owner, status__in=Message.LIVE).exclude(tool_calls=None).count() == 0
    dump = pg_dump()
    assert RESULT not in dump and "Zephyrine" not in dump

    # Results for the forgotten call, sent again, are refused and not stored.
    late = client.with_options(max_retries=0)
    with pytest.raises(openai.ConflictError) as refused:
        late.chat.completions.create(model="dellm", messages=transcript[:5], tools=TOOLS)
    assert refused.value.body["code"] == "tool_call_not_found"
    assert not Message.objects.filter(owner=owner, content=RESULT).exists()


def test_a_tool_call_without_streaming_and_parallel_calls(upstream, live_server, owner, token):
    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=token, max_retries=0, timeout=60)
    upstream.script = [
        ("tools", [("call_a", "get_weather", '{"city": "Oslo"}'), ("call_b", "get_weather", '{"city": "Rome"}')])
    ]
    question = {"role": "user", "content": "Weather in Oslo and Rome?"}
    response = client.chat.completions.create(model="dellm", messages=[question], tools=TOOLS, parallel_tool_calls=True)
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls] == [
        ("call_a", "get_weather", '{"city": "Oslo"}'),
        ("call_b", "get_weather", '{"city": "Rome"}'),
    ]
    assert chat_requests(upstream)[-1]["parallel_tool_calls"] is True
    upstream.script = [("ok", "Cold in Oslo, warm in Rome.")]
    followup = [
        question,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_b", "content": "Rome: 25 C"},
        {"role": "tool", "tool_call_id": "call_a", "content": "Oslo: 2 C"},
    ]
    answer = client.chat.completions.create(model="dellm", messages=followup, tools=TOOLS)
    assert answer.choices[0].message.content == "Cold in Oslo, warm in Rome."
    assert answer.choices[0].finish_reason == "stop"
    reply = answer.model_extra["dellm"]["reply_id"]
    results = list(Message.objects.filter(owner=owner, role="tool").order_by("seq"))
    assert [(m.tool_call_id, m.content) for m in results] == [("call_b", "Rome: 25 C"), ("call_a", "Oslo: 2 C")]
    call = response.model_extra["dellm"]["reply_id"]
    # Each result derives from the call (rank: the call's index), the answer from each result (ranks after the
    # question, 0, the context, none here, and the system prompt's place, 1).
    assert sorted(ContextEdge.objects.filter(signal="tool").values_list("source_id", "target_id", "rank")) == sorted(
        [(call, results[0].pk, 1), (call, results[1].pk, 0), (results[0].pk, reply, 2), (results[1].pk, reply, 3)]
    )


def test_the_offline_responder_offered_tools_answers_in_text(start_worker, asgi_server, owner, token):
    from dellm_site.celery import app as celery_app

    start_worker({"DELLM_LLM": "offline"})
    url = asgi_server({"DELLM_CELERY_QUEUE": celery_app.conf.task_default_queue}).url
    with openai.OpenAI(base_url=f"{url}/v1", api_key=token, max_retries=0, timeout=60) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="dellm", messages=[{"role": "user", "content": FACT}], tools=TOOLS, tool_choice="auto"
        )
        done = raw.parse()
        text, calls, finish, dellm = streamed(
            client,
            [
                {"role": "user", "content": FACT},
                {"role": "assistant", "content": done.choices[0].message.content},
                {"role": "user", "content": QUESTION},
            ],
            tools=TOOLS,
            tool_choice="required",
        )

    assert raw.status_code == 200
    choice = done.choices[0]
    assert (choice.message.content, choice.message.tool_calls, choice.finish_reason) == (
        NOTED,
        None,
        "stop",
    )
    assert (text, calls, finish) == (f"From what you told me: “{FACT}”", [], "stop")
    assert dellm["thread_id"] == done.model_extra["dellm"]["thread_id"]
    turns = Message.objects.filter(owner=owner).exclude(role="fact")
    assert list(turns.values_list("role", "content", "tool_calls")) == [
        ("user", FACT, None),
        ("assistant", NOTED, None),
        ("user", QUESTION, None),
        ("assistant", text, None),
    ]
    assert not ContextEdge.objects.filter(signal="tool").exists()
