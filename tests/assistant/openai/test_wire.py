"""The wire format of `/v1/`: OpenAI's objects, chunks, errors and headers, byte for byte where it matters.

Tasks run eagerly here (no worker): the view subscribes to the turn's events,
the eager task publishes them while it runs, and the relay reads them back.
"""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from assistant.openai.views import CompletionThrottle
from chat.index.embeddings import embed_one
from chat.models import ContextEdge, Message, Thread, Turn
from core.auth.tokens import token_create
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message, make_thread, make_tool_steps

URL = "/v1/chat/completions"


@pytest.fixture
def v1(owner) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token_create(user=owner)[1]}")


def post(client: Client, body: object, **headers: str):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", **headers)


def ask(text: str, **extra: object) -> dict:
    return {"model": "dellm", "messages": [{"role": "user", "content": text}], **extra}


def events(response) -> list[str]:
    """The `data:` payloads of a streamed response, in order (comments and blank lines left out)."""
    body = b"".join(response.streaming_content).decode()
    return [line.removeprefix("data: ") for line in body.split("\n") if line.startswith("data: ")]


def error(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_models_lists_the_configured_model(v1):
    assert v1.get("/v1/models").json() == {
        "object": "list",
        "data": [{"id": "dellm", "object": "model", "created": 0, "owned_by": "dellm"}],
    }
    assert v1.get("/v1/models/dellm").json() == {"id": "dellm", "object": "model", "created": 0, "owned_by": "dellm"}
    missing = v1.get("/v1/models/gpt-4o")
    assert missing.status_code == 404
    assert error(missing)["code"] == "model_not_found"


def test_completion_object_is_openais(v1, owner):
    response = post(v1, ask("I keep bees on my roof."))
    assert response.status_code == 200
    body = response.json()
    [message, reply] = Message.objects.filter(owner=owner)
    assert body["id"] == f"chatcmpl-dellm-turn-{body['dellm']['turn_id']}"
    assert body["object"] == "chat.completion"
    assert body["model"] == "dellm"
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": reply.content, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    # Nothing the offline extractor reads as a fact about the user: acknowledged, not echoed.
    assert reply.content == "Noted."
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert body["dellm"] == {
        "thread_id": message.thread_id,
        "turn_id": body["dellm"]["turn_id"],
        "message_id": message.pk,
        "system_message_id": None,
        "reply_id": reply.pk,
        "context": [],
        "context_seqs": [],
        "facts": [],
        "stored": 0,
        "dropped": 0,
    }
    assert response["X-DeLLM-Context"] == ""
    assert response["X-DeLLM-Reply"] == str(reply.pk)
    assert response["Cache-Control"] == "no-store"


def test_stream_is_role_then_content_then_stop_then_usage_then_done(v1, owner):
    make_message(make_thread(owner), "I keep bees on my roof.", embedding=embed_one("I keep bees on my roof."))
    response = post(v1, ask("Where are my bees?", stream=True, stream_options={"include_usage": True}))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["X-DeLLM-Turn"]
    data = events(response)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(item) for item in data[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({(c["id"], c["created"], c["model"]) for c in chunks}) == 1
    first, *middle, final, usage = chunks
    assert first["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    assert all(
        c["choices"][0]["finish_reason"] is None and set(c["choices"][0]["delta"]) == {"content"} for c in middle
    )
    # include_usage: every chunk carries `usage`, null until the usage-only chunk.
    assert [c["usage"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert final["choices"] == [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]
    assert usage["choices"] == []
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"]
    text = "".join(c["choices"][0]["delta"]["content"] for c in middle)
    reply = Message.objects.get(pk=final["dellm"]["reply_id"])
    assert text == reply.content == "From what you told me: “I keep bees on my roof.”"
    fact = Message.objects.get(content="I keep bees on my roof.")
    assert (final["dellm"]["context"], final["dellm"]["context_seqs"]) == ([fact.pk], [fact.seq])
    assert "dellm" not in first


def test_stream_without_usage_has_no_usage_field(v1):
    chunks = [json.loads(item) for item in events(post(v1, ask("Hello there.", stream=True)))[:-1]]
    assert all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"model": "dellm"}, "messages", None),
        ({"model": "dellm", "messages": []}, "messages", None),
        ({"messages": [{"role": "user", "content": "hi"}]}, "model", None),
        (ask("hi", n=2), "n", None),
        (ask("hi", functions=[{"name": "f"}]), "functions", "unsupported_parameter"),
        (ask("hi", tools={"type": "function"}), "tools", None),
        (ask("hi", tools=[{"type": "custom", "custom": {"name": "f"}}]), "tools[0].type", None),
        (
            ask("hi", tools=[{"type": "function", "function": {"name": "no spaces"}}]),
            "tools[0].function.name",
            "invalid_value",
        ),
        (
            ask("hi", tools=[{"type": "function", "function": {"name": "f", "parameters": "{}"}}]),
            "tools[0].function.parameters",
            None,
        ),
        (ask("hi", tools=[{"type": "function", "function": {"name": "f"}}] * 2), "tools[1].function.name", None),
        (ask("hi", tools=[{"type": "function", "function": {"name": "f"}}] * 129), "tools", "array_above_max_length"),
        (ask("hi", tool_choice="auto"), "tool_choice", None),
        (
            ask("hi", tools=[{"type": "function", "function": {"name": "f"}}], tool_choice="sometimes"),
            "tool_choice",
            None,
        ),
        (
            ask(
                "hi",
                tools=[{"type": "function", "function": {"name": "f"}}],
                tool_choice={"type": "function", "function": {"name": "g"}},
            ),
            "tool_choice",
            None,
        ),
        (
            ask("hi", tools=[{"type": "function", "function": {"name": "f"}}], parallel_tool_calls="yes"),
            "parallel_tool_calls",
            None,
        ),
        (
            {
                "model": "dellm",
                "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c1", "content": "x"}],
            },
            "messages[1].tool_call_id",
            None,
        ),
        (
            {
                "model": "dellm",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                    },
                    {"role": "user", "content": "and?"},
                ],
            },
            "messages[2].role",
            None,
        ),
        (
            {
                "model": "dellm",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {}}}],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "x"},
                ],
            },
            "messages[1].tool_calls[0].function.arguments",
            None,
        ),
        (
            {"model": "dellm", "messages": [{"role": "user", "content": "hi", "tool_calls": []}]},
            "messages[0].tool_calls",
            None,
        ),
        (ask("hi", response_format={"type": "json_object"}), "response_format", None),
        (ask("hi", stream_options={"include_usage": True}), "stream_options", None),
        (ask("hi", stream="yes"), "stream", None),
        (
            {"model": "dellm", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages[0].content[0].type",
            "unsupported_content_type",
        ),
        ({"model": "dellm", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id", None),
        (
            {"model": "dellm", "messages": [{"role": "function", "name": "f", "content": "x"}]},
            "messages[0].role",
            "unsupported_parameter",
        ),
        ({"model": "dellm", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role", None),
        ({"model": "dellm", "messages": [{"role": "user"}]}, "messages[0].content", None),
        ({"model": "dellm", "messages": [{"role": "user", "content": 7}]}, "messages[0].content", None),
        ({"model": "dellm", "messages": [{"role": "assistant", "content": "hi"}]}, "messages", None),
        ({"model": "dellm", "messages": [{"role": "user", "content": "   "}]}, "messages", None),
        (ask("x" * 20_001), "messages[0].content", "string_above_max_length"),
        (["not", "an", "object"], None, None),
    ],
)
def test_invalid_requests_are_400_in_openais_shape_and_change_nothing(v1, owner, body, param, code):
    response = post(v1, body)
    assert response.status_code == 400
    assert error(response) | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": param,
        "code": code,
    }
    assert not Message.objects.exists()
    assert not Thread.objects.exists()


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        ("[" * 100_000, None),
        ('{"a":' * 50_000 + "1" + "}" * 50_000, None),
        (b'{"model": "dellm", "messages": [{"role": "user", "content": "caf\xe9"}]}', None),
        ('{"model": "dellm", "messages": [{"role": "user", "content": "a\\u0000b"}]}', "messages[0].content"),
        ('{"model": "dellm", "messages": [{"role": "user", "content": "a\\ud800b"}]}', "messages[0].content"),
        (
            json.dumps(
                {"model": "dellm", "messages": [{"role": "system", "content": "a\x00"}, ask("hi")["messages"][0]]}
            ),
            "messages[0].content",
        ),
        ('"just a string"', None),
        ("null", None),
    ],
)
def test_hostile_bodies_are_400_never_500(v1, owner, raw, param):
    response = post(v1, raw)
    assert response.status_code == 400
    assert error(response)["param"] == param
    assert not Message.objects.exists()


@pytest.mark.parametrize("key", ["\u00b2", "1\u00b9", "-1", "1.5", "12345678901234567890"])
def test_a_malformed_thread_key_is_400(v1, owner, key):
    response = post(v1, ask("hi"), HTTP_X_DELLM_THREAD=key)
    assert response.status_code == 400
    assert error(response)["param"] == "X-DeLLM-Thread"
    response = post(v1, ask("hi", metadata={"dellm_thread": key}))
    assert response.status_code == 400
    assert error(response)["param"] == "metadata.dellm_thread"
    assert not Message.objects.exists()


def test_unknown_fields_are_ignored(v1):
    response = post(v1, ask("Hello.", temperature=0.2, max_tokens=5, user="u-1", seed=3, frobnicate={"x": 1}))
    assert response.status_code == 200


def test_unknown_model_is_404(v1):
    response = post(v1, {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 404
    assert error(response) == {
        "message": "The model 'gpt-4o' does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }


def test_malformed_json_is_400(v1):
    response = post(v1, "{not json")
    assert response.status_code == 400
    assert error(response)["message"] == "We could not parse the JSON body of your request."


def test_oversize_body_is_413(v1, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = post(v1, ask("x" * 2000))
    assert response.status_code == 413
    assert error(response)["code"] == "request_too_large"
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "invalid_api_key"),
        ("Bearer not-a-token", "invalid_api_key"),
        ("Token not-a-token", "invalid_api_key"),
        ("Bearer", "invalid_api_key"),
        ("Bearer a b", "invalid_api_key"),
    ],
)
def test_a_missing_or_wrong_key_is_401(db, header, code):
    client = Client(HTTP_AUTHORIZATION=header) if header else Client()
    for response in (post(client, ask("hi")), client.get("/v1/models")):
        assert response.status_code == 401
        assert error(response)["code"] == code
        assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert not Message.objects.exists()


def test_the_drf_token_keyword_works_too(owner):
    client = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=owner)[1]}")
    assert client.get("/v1/models").status_code == 200


def test_completions_share_the_chat_throttle(v1, monkeypatch):
    monkeypatch.setattr(CompletionThrottle, "THROTTLE_RATES", {"chat": "2/min"})
    assert [post(v1, ask(f"Message {i}.")).status_code for i in range(2)] == [200, 200]
    response = post(v1, ask("One too many."))
    assert response.status_code == 429
    assert error(response) | {"message": ""} == {
        "message": "",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert int(response["Retry-After"]) > 0
    assert Message.objects.filter(content="One too many.").count() == 0


def test_a_stream_beyond_the_per_user_cap_is_429_and_stores_nothing(v1, owner, settings):
    from asgiref.sync import async_to_sync

    from chat.models import Turn
    from core.streams.slots import stream_slot_acquire, stream_slot_release

    settings.DELLM_MAX_STREAMS_PER_USER = 1
    held = async_to_sync(stream_slot_acquire)(owner.pk)
    assert held is not None
    try:
        response = post(v1, ask("One stream too many.", stream=True))
        counts = (Message.objects.count(), Turn.objects.count())
    finally:
        async_to_sync(stream_slot_release)(owner.pk, held)
    assert response.status_code == 429
    assert error(response) | {"message": ""} == {
        "message": "",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert response["Retry-After"] == "5"
    assert counts == (0, 0)
    # Each served stream gives its slot back when it ends: two in a row under a cap of one.
    for text in ("Now there is room.", "And again."):
        answered = post(v1, ask(text, stream=True))
        assert (answered.status_code, events(answered)[-1]) == (200, "[DONE]")
    assert Turn.objects.filter(status="done").count() == 2


def test_wrong_method_and_unknown_address_are_openai_errors(v1):
    response = v1.get(URL)
    assert (response.status_code, response["Allow"], error(response)["type"]) == (405, "POST", "invalid_request_error")
    response = v1.get("/v1/embeddings")
    assert response.status_code == 404
    assert error(response)["code"] == "unknown_url"


def test_another_users_thread_is_404(v1, other_owner):
    theirs = make_thread(other_owner)
    response = post(v1, ask("hi"), HTTP_X_DELLM_THREAD=str(theirs.pk))
    assert response.status_code == 404
    assert error(response)["param"] == "thread"
    assert not Message.objects.exists()


def test_an_explicit_thread_key_continues_that_thread(v1, owner, thread):
    body = post(v1, ask("I keep bees."), HTTP_X_DELLM_THREAD=str(thread.pk)).json()
    assert body["dellm"]["thread_id"] == thread.pk
    body = post(v1, ask("More bees.", metadata={"dellm_thread": str(thread.pk)})).json()
    assert body["dellm"]["thread_id"] == thread.pk
    assert Message.objects.filter(thread=thread).count() == 4


def test_a_deletion_request_is_answered_with_the_preview_and_never_stored(v1, owner):
    thread = make_thread(owner)
    fact = make_message(thread, "I live in Paris.", embedding=embed_one("I live in Paris."))
    derived = make_message(thread, "Noted: I live in Paris.", role="assistant")
    make_edge(fact, derived)
    response = post(v1, ask("Forget that I live in Paris"))
    assert response.status_code == 200
    body = response.json()
    deletion = DeletionRequest.objects.get()
    assert (deletion.status, deletion.mode, deletion.matched_ids) == ("previewed", "soft", [fact.pk])
    link = f"http://testserver/?deletion={deletion.pk}"
    assert body["choices"][0]["message"]["content"] == (
        f"Nothing has been deleted yet. Forgetting this would remove 2 messages from your DeLLM memory: "
        f"#{fact.seq} matched, and #{derived.seq} derived from it. Review and confirm (or cancel) in DeLLM: "
        f"{link}\n\n(This request was not stored.)"
    )
    assert body["dellm"]["deletion_id"] == deletion.pk
    assert body["dellm"]["deletion_url"] == link
    assert response["X-DeLLM-Deletion"] == str(deletion.pk)
    assert Message.objects.count() == 2
    assert Thread.objects.count() == 1

    streamed = [json.loads(item) for item in events(post(v1, ask("Forget that I live in Paris", stream=True)))[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in streamed).startswith("Nothing has been deleted")
    assert streamed[-1]["choices"][0]["finish_reason"] == "stop"
    assert Message.objects.count() == 2


def test_a_deletion_answer_names_the_tool_steps_that_go_and_says_they_are_never_regenerated(v1, owner):
    steps = make_tool_steps(
        make_thread(owner),
        question="I live in Grenoble. Will it rain here?",
        arguments='{"city": "Grenoble"}',
        result="rain after noon",
        answer="Yes, bring an umbrella.",
    )
    question, call, result, answer = (steps[name].seq for name in ("question", "call", "result", "answer"))

    body = post(v1, ask("Forget that I live in Grenoble")).json()

    deletion = DeletionRequest.objects.get()
    assert body["choices"][0]["message"]["content"] == (
        f"Nothing has been deleted yet. Forgetting this would remove 4 messages from your DeLLM memory: "
        f"#{question} matched, and #{call}, #{result}, #{answer} derived from it. #{call} (a tool call), "
        f"#{result} (a tool result) and #{answer} (an answer written after tool results) are tool steps: they "
        f"are deleted, never regenerated, even if you choose to rewrite what was derived (DeLLM cannot run your "
        f"tools again). Review and confirm (or cancel) in DeLLM: http://testserver/?deletion={deletion.pk}"
        f"\n\n(This request was not stored.)"
    )
    one = post(v1, ask('Forget "umbrella"')).json()["choices"][0]["message"]["content"]
    assert f"#{answer} matched. #{answer} (an answer written after tool results) is a tool step: it is deleted, " in one


def test_a_replayed_deletion_request_and_its_preview_keep_no_position(v1, owner):
    first = post(v1, ask("I keep bees.")).json()
    reply = Message.objects.get(pk=first["dellm"]["reply_id"]).content
    preview = post(v1, ask("Forget that I keep bees")).json()["choices"][0]["message"]["content"]
    body = post(
        v1,
        {
            "model": "dellm",
            "messages": [
                {"role": "user", "content": "I keep bees."},
                {"role": "assistant", "content": reply},
                {"role": "user", "content": "Forget that I keep bees"},
                {"role": "assistant", "content": preview},
                {"role": "user", "content": "And two goats."},
            ],
        },
    ).json()
    assert body["dellm"]["thread_id"] == first["dellm"]["thread_id"]
    assert (body["dellm"]["stored"], body["dellm"]["dropped"]) == (0, 0)
    assert not Message.objects.filter(content__contains="Forget").exists()


def test_an_unreachable_queue_is_503_and_the_turn_fails_visibly(v1, monkeypatch):
    import redis

    from assistant.openai import views
    from chat.models import Turn

    def down(turn_id: int):
        raise redis.ConnectionError("connection refused")

    monkeypatch.setattr(views, "subscribe_sync", down)
    response = post(v1, ask("Hello?"))
    assert response.status_code == 503
    assert error(response) | {"message": ""} == {
        "message": "",
        "type": "server_error",
        "param": None,
        "code": "service_unavailable",
    }
    assert response["Retry-After"] == "5"
    turn = Turn.objects.get()
    assert (turn.status, turn.error, turn.user_message.content) == (
        "failed",
        "The reply could not be queued; please retry.",
        "Hello?",
    )


def test_a_system_prompt_is_stored_and_the_task_payload_holds_the_turn_id_only(v1, owner, monkeypatch):
    from chat.turns.tasks import turn_run_task

    sent = []
    delay = turn_run_task.delay
    monkeypatch.setattr(
        turn_run_task, "delay", lambda *args, **kwargs: sent.append((args, kwargs)) or delay(*args, **kwargs)
    )
    system = {"role": "system", "content": "Call me Captain."}
    developer = {"role": "developer", "content": "Never use emoji."}
    first = post(v1, {"model": "dellm", "messages": [system, developer, {"role": "user", "content": "Hello."}]})
    dellm = first.json()["dellm"]
    prompt = Message.objects.get(owner=owner, role="system")
    # The system and developer messages, in order, are one stored node with an edge to the reply.
    assert (dellm["system_message_id"], prompt.content) == (prompt.pk, "Call me Captain.\n\nNever use emoji.")
    assert sent == [((), {"turn_id": dellm["turn_id"], "owner_id": owner.pk})]
    assert ContextEdge.objects.filter(source=prompt, target_id=dellm["reply_id"], signal="system").exists()
    # The same prompt in the same conversation: the same node; it holds no position in the transcript.
    again = post(
        v1,
        {
            "model": "dellm",
            "messages": [
                system,
                developer,
                {"role": "user", "content": "Hello."},
                {"role": "assistant", "content": first.json()["choices"][0]["message"]["content"]},
                {"role": "user", "content": "Hello again."},
            ],
        },
    ).json()["dellm"]
    assert (again["thread_id"], again["system_message_id"], again["stored"], again["dropped"]) == (
        dellm["thread_id"],
        prompt.pk,
        0,
        0,
    )
    assert [kwargs for _, kwargs in sent] == [
        {"turn_id": dellm["turn_id"], "owner_id": owner.pk},
        {"turn_id": again["turn_id"], "owner_id": owner.pk},
    ]
    assert list(Message.objects.filter(owner=owner).values_list("role", flat=True)) == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_system_messages_longer_than_a_message_together_are_400(v1, owner, settings):
    settings.DELLM_MAX_MESSAGE_CHARS = 10
    parts = [{"role": "system", "content": "a" * 6}, {"role": "developer", "content": "b" * 6}]
    response = post(v1, {"model": "dellm", "messages": [*parts, {"role": "user", "content": "hi"}]})
    assert response.status_code == 400
    assert (error(response)["param"], error(response)["code"]) == ("messages", "string_above_max_length")
    assert not Message.objects.exists()


def _transcript_past(thread, new: int) -> list[dict]:
    """The thread's two stored messages, then `new` the thread does not have, then the turn's question."""
    said = [{"role": "user", "content": "I keep bees."}, {"role": "assistant", "content": "Bees, noted."}]
    for message in said:
        make_message(thread, message["content"], role=message["role"])
    extra = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"elsewhere {i}"} for i in range(new)]
    return [*said, *extra, {"role": "user", "content": "And now?"}]


def test_more_new_transcript_messages_than_a_request_may_store_is_413_and_stores_nothing(v1, owner, thread, settings):
    # The review's case: a transcript of ~1,000 new messages, within the chat budget, stored in one request.
    settings.DELLM_COMPLETION_MAX_NEW_MESSAGES = 100
    messages = _transcript_past(thread, 101)
    response = post(
        v1,
        {"model": "dellm", "messages": [{"role": "system", "content": "Be brief."}, *messages]},
        HTTP_X_DELLM_THREAD=str(thread.pk),
    )
    assert response.status_code == 413
    assert error(response) == {
        "message": "The transcript holds 101 messages this thread does not have; at most 100 are stored per "
        "request. Bring a whole history in through the import.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "quota_exceeded",
    }
    # Not the system prompt, not the question, no turn.
    assert list(Message.objects.filter(owner=owner).values_list("content", flat=True)) == [
        "I keep bees.",
        "Bees, noted.",
    ]
    assert not Turn.objects.exists()
    # At the cap, they are stored.
    body = post(v1, {"model": "dellm", "messages": messages[:-2] + messages[-1:]}, HTTP_X_DELLM_THREAD=str(thread.pk))
    assert body.status_code == 200
    assert body.json()["dellm"]["stored"] == 100


def test_a_transcript_to_an_account_at_its_total_quota_is_413_and_stores_nothing(v1, owner, thread, settings):
    # The account holds its two messages, all DELLM_QUOTA_MESSAGES allows; waiting frees nothing, so 413, not 429.
    settings.DELLM_QUOTA_MESSAGES = 2
    messages = _transcript_past(thread, 3)
    response = post(v1, {"model": "dellm", "messages": messages}, HTTP_X_DELLM_THREAD=str(thread.pk))
    assert response.status_code == 413
    assert "Retry-After" not in response
    assert error(response) == {
        "message": "Storing the transcript would pass this account's quota of 2 messages in all "
        "(it holds 2, purged ones included).",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "quota_exceeded",
    }
    assert list(Message.objects.filter(owner=owner).values_list("content", flat=True)) == [
        "I keep bees.",
        "Bees, noted.",
    ]
    assert not Turn.objects.exists()


def test_a_transcript_past_the_days_quota_is_429_with_retry_after_and_stores_nothing(v1, owner, thread, settings):
    settings.DELLM_QUOTA_MESSAGES_PER_DAY = 5
    messages = _transcript_past(thread, 4)
    Message.objects.filter(owner=owner).update(created_at=timezone.now() - timedelta(hours=2))
    response = post(v1, {"model": "dellm", "messages": messages}, HTTP_X_DELLM_THREAD=str(thread.pk))
    assert response.status_code == 429
    assert response["Retry-After"] == str(22 * 3600)
    assert error(response) | {"message": ""} == {
        "message": "",
        "type": "insufficient_quota",
        "param": "messages",
        "code": "quota_exceeded",
    }
    assert Message.objects.filter(owner=owner).count() == 2
    # A question alone stores no transcript: it is not refused (turns are bounded by the chat budget).
    answered = post(
        v1, {"model": "dellm", "messages": messages[:2] + messages[-1:]}, HTTP_X_DELLM_THREAD=str(thread.pk)
    )
    assert answered.status_code == 200
