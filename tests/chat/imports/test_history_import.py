"""Importing histories into the store: idempotency, atomicity, conservative provenance, round trip."""

import json

import pytest

from chat.imports.formats import Limits, parse_file
from chat.imports.history import PayloadTooLarge, history_import, history_parse
from chat.index.embeddings import embed_one
from chat.models import ContextEdge, Message, Thread
from chat.writer import Branch, Source, Supplied, message_store, tool_results_store, transcripts_store
from core.errors import ValidationFailed
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.dependents import dep_ids, taint_violations
from tests.factories import make_edge, make_message, make_thread
from tests.helpers import FIXTURES

CHATGPT = json.loads((FIXTURES / "chatgpt_conversations.json").read_text())
LISBON = ["aaa2b1c0-u1", "c3f9e8b2-a1", "aaa2d4e5-u2", "f7a8b9c0-a2", "aaa2f0e1-u3", "0a1b2c3d-a3"]


def run_import(owner, document, **kwargs):
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    return history_import(owner_id=owner.pk, parsed=parse_file(data, **kwargs))


def by_source(owner) -> dict[str, Message]:
    return {m.source_id: m for m in Message.objects.filter(owner=owner)}


def sources_of(message: Message) -> set[int]:
    return set(ContextEdge.objects.filter(target=message).values_list("source_id", flat=True))


def ancestors(owner, message: Message, candidates: list[Message]) -> set[Message]:
    """The candidates whose Dep holds `message` (itself left out)."""
    return {m for m in candidates if m != message and message.pk in dep_ids(owner_id=owner.pk, roots=[m.pk])}


def with_turn(document, *new_nodes):
    """The Lisbon conversation continued by (node id, role, text) after its current node."""
    document = json.loads(json.dumps(document))
    conversation = document[0]
    parent = conversation["current_node"]
    for node_id, role, text in new_nodes:
        conversation["mapping"][parent]["children"].append(node_id)
        conversation["mapping"][node_id] = {
            "id": node_id,
            "message": {
                "id": node_id,
                "author": {"role": role},
                "create_time": 1714558000.0,
                "content": {"content_type": "text", "parts": [text]},
                "metadata": {},
                "recipient": "all",
            },
            "parent": parent,
            "children": [],
        }
        parent = node_id
    conversation["current_node"] = parent
    return document


def test_import_keeps_order_roles_marks_and_conservative_edges(owner, thread):
    make_message(thread, "an earlier native message")
    progress = run_import(owner, CHATGPT)
    assert (progress.messages_imported, progress.messages_skipped, progress.conversations_failed) == (8, 0, 0)
    lisbon = Thread.objects.get(owner=owner, source="chatgpt", source_id="664a1f2e-0b3c-8005-a1b2-lisbon")
    messages = list(Message.objects.filter(thread=lisbon).order_by("seq"))
    assert [(m.source_id, m.role, m.imported_from) for m in messages] == [
        (key, "user" if key.split("-")[-1].startswith("u") else "assistant", "chatgpt") for key in LISBON
    ]
    assert [m.seq for m in messages] == list(range(2, 8))
    assert lisbon.title == "Trip to Lisbon"
    assert all(m.embedding is not None for m in messages)
    # Each reply derives from every earlier message of its branch (they are its ancestors, so
    # they are in its Dep), through linear edges: from the previous reply and every message since.
    for index, message in enumerate(messages):
        assert ancestors(owner, message, messages) == (set(messages[:index]) if message.role == "assistant" else set())
    assert [sorted(sources_of(m)) for m in messages] == [
        [],
        [messages[0].pk],
        [],
        [messages[1].pk, messages[2].pk],
        [],
        [messages[3].pk, messages[4].pk],
    ]
    edges = ContextEdge.objects.filter(owner=owner)
    assert edges.count() == 1 + 2 + 2 + 1  # Lisbon replies at positions 1, 3, 5; Python's reply at 1
    assert set(edges.values_list("signal", flat=True)) == {"transcript"}
    reply = messages[5]
    assert list(ContextEdge.objects.filter(target=reply).order_by("rank").values_list("source_id", "rank")) == [
        (messages[4].pk, 0),
        (messages[3].pk, 1),
    ]
    assert progress.edges_created == 6
    assert sorted(progress.threads) == sorted(
        Thread.objects.filter(owner=owner, source="chatgpt").values_list("pk", flat=True)
    )


def test_second_import_adds_nothing_and_a_grown_conversation_appends_only_new(owner):
    run_import(owner, CHATGPT)
    before = (Message.objects.count(), ContextEdge.objects.count(), Thread.objects.count())
    again = run_import(owner, CHATGPT)
    assert (again.messages_imported, again.edges_created) == (0, 0)
    assert (Message.objects.count(), ContextEdge.objects.count(), Thread.objects.count()) == before
    grown = with_turn(CHATGPT, ("u4", "user", "Any day trips?"), ("a4", "assistant", "Sintra is an easy day trip."))
    progress = run_import(owner, grown)
    assert (progress.messages_imported, progress.edges_created) == (2, 2)
    rows = by_source(owner)
    # The stored previous reply already derives from everything before it: two edges suffice.
    assert sources_of(rows["a4"]) == {rows["0a1b2c3d-a3"].pk, rows["u4"].pk}
    lisbon = [rows[key] for key in [*LISBON, "u4", "a4"]]
    assert ancestors(owner, rows["a4"], lisbon) == set(lisbon[:-1])
    assert rows["a4"].seq == max(m.seq for m in rows.values())


def test_deleted_imported_message_stays_deleted_and_later_new_replies_are_skipped(owner):
    run_import(owner, CHATGPT)
    rows = by_source(owner)
    deletion = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[rows["aaa2f0e1-u3"].pk])
    assert deletion.dependent_ids == [rows["0a1b2c3d-a3"].pk]
    deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)
    grown = with_turn(CHATGPT, ("u4", "user", "Any day trips?"), ("a4", "assistant", "Sintra."))
    progress = run_import(owner, grown)
    assert (progress.messages_imported, progress.messages_skipped) == (1, 1)
    rows = by_source(owner)
    assert rows["aaa2f0e1-u3"].status == rows["0a1b2c3d-a3"].status == "deleted"
    assert "a4" not in rows
    assert taint_violations(owner_id=owner.pk) == []


def test_a_later_imported_reply_quoting_a_purged_message_is_not_stored(owner):
    """The same rule as `/v1` (tests/assistant/openai/test_openai_client.py)."""
    run_import(owner, CHATGPT)
    rows = by_source(owner)
    first = rows["aaa2b1c0-u1"]
    deletion = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[first.pk])
    # Every imported reply of the conversation derives from its first message.
    assert deletion.dependent_ids == sorted(rows[key].pk for key in ["c3f9e8b2-a1", "f7a8b9c0-a2", "0a1b2c3d-a3"])
    deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)
    grown = with_turn(
        CHATGPT,
        ("u4", "user", "What did I tell you first?"),
        ("a4", "assistant", "You said: I'm planning a trip to Lisbon in May. Where should I stay?"),
    )
    progress = run_import(owner, grown)
    assert (progress.messages_imported, progress.messages_skipped, progress.edges_created) == (1, 1, 0)
    # By id: a purge replaced the purged messages' import keys by digests (chat/source_keys.py).
    status = dict(Message.objects.filter(owner=owner).values_list("pk", "status"))
    assert {key: status[rows[key].pk] for key in LISBON} == {
        "aaa2b1c0-u1": "purged",
        "c3f9e8b2-a1": "purged",
        "aaa2d4e5-u2": "active",
        "f7a8b9c0-a2": "purged",
        "aaa2f0e1-u3": "active",
        "0a1b2c3d-a3": "purged",
    }
    rows = by_source(owner)
    assert rows["u4"].status == "active"
    assert "a4" not in rows
    assert not Message.objects.filter(status__in=Message.LIVE, content__contains="Lisbon in May").exists()
    assert taint_violations(owner_id=owner.pk) == []


def test_conservative_cascade_and_preview_flags_imported_replies(owner, api):
    run_import(owner, CHATGPT)
    rows = by_source(owner)
    thread = rows["aaa2b1c0-u1"].thread
    native = make_message(thread, "a native reply that used the hotel question", role="assistant")
    ContextEdge.objects.create(owner=owner, source=rows["aaa2d4e5-u2"], target=native, rank=1, score=0.5)
    root = rows["aaa2d4e5-u2"]
    later_replies = sorted(rows[key].pk for key in ["f7a8b9c0-a2", "0a1b2c3d-a3"])
    assert dep_ids(owner_id=owner.pk, roots=[root.pk]) == {root.pk, *later_replies, native.pk}
    response = api.post("/api/deletions/", {"select": {"ids": [root.pk]}, "mode": "soft"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["dependents"] == [*later_replies, native.pk]
    assert body["imported_dependents"] == later_replies
    listed = api.get("/api/deletions/").json()
    assert listed[0]["imported_dependents"] == later_replies
    message = api.get(f"/api/messages/{later_replies[0]}/").json()
    # By rank: the nearest earlier message first.
    assert (message["imported_from"], message["context"]) == ("chatgpt", [rows[key].pk for key in LISBON[2:0:-1]])
    assert [edge["signal"] for edge in message["context_detail"]] == ["transcript", "transcript"]
    assert api.get(f"/api/messages/{native.pk}/").json()["imported_from"] is None
    nodes = {node["data"]["id"]: node["data"]["imported_from"] for node in api.get("/api/graph/").json()["nodes"]}
    assert nodes == {**{m.pk: "chatgpt" for m in rows.values()}, native.pk: None}


def test_each_conversation_is_atomic_a_failing_one_leaves_the_others(owner, monkeypatch):
    real = transcripts_store
    calls = []

    def fail_second(*, owner_id, branches):
        calls.append(branches)
        if len(calls) == 2:
            raise ValidationFailed("boom")
        return real(owner_id=owner_id, branches=branches)

    monkeypatch.setattr("chat.imports.history.transcripts_store", fail_second)
    document = json.loads(json.dumps(CHATGPT))
    document.append({"id": "broken", "title": "x", "mapping": {}, "current_node": "nowhere"})
    progress = run_import(owner, document)
    assert progress.errors == [
        {"conversation": "broken", "field": "mapping.nowhere", "message": "is referenced as a parent but missing"},
        {"conversation": "664b7c9d-1e2f-8005-b3c4-python", "field": "messages", "message": "boom"},
    ]
    assert (progress.conversations_failed, progress.messages_imported) == (2, 6)
    assert set(Thread.objects.filter(owner=owner).values_list("source_id", flat=True)) == {
        "664a1f2e-0b3c-8005-a1b2-lisbon"
    }
    assert sorted(by_source(owner)) == sorted(LISBON)


def test_dellm_export_round_trip_same_messages_and_edges(owner, other_owner, api, other_api):
    first, second = make_thread(owner, "Paris"), make_thread(owner, "Tea")
    # A /v1 client's stored system prompt is restored too, with its edge.
    m0 = make_message(first, "Answer in one line.", role="system")
    m1 = make_message(first, "I live in Paris")
    m2 = make_message(second, "I like green tea")
    m3 = make_message(first, "Paris, noted", role="assistant")
    m4 = make_message(second, "Green tea from Paris", role="assistant")
    signals = ["system", "", "vector", "lexical", "both"]
    for (source, target), signal in zip([(m0, m3), (m1, m3), (m1, m4), (m2, m4), (m3, m4)], signals, strict=True):
        ContextEdge.objects.create(owner=owner, source=source, target=target, rank=1, score=0.25, signal=signal)
    # The export is streamed (sec-hardening).
    export = b"".join(api.get("/api/export/").streaming_content)
    progress = run_import(other_owner, export)
    assert (progress.messages_imported, progress.edges_created, progress.errors) == (5, 5, [])

    def shape(api_client):
        document = json.loads(b"".join(api_client.get("/api/export/").streaming_content))
        titles = {t["id"]: t["title"] for t in document["threads"]}
        position = {m["id"]: i for i, m in enumerate(document["messages"])}
        messages = [(titles[m["thread"]], m["role"], m["content"]) for m in document["messages"]]
        edges = sorted(
            (position[e["source"]], position[e["target"]], e["rank"], e["score"], e["signal"])
            for e in document["edges"]
        )
        return messages, edges

    assert shape(other_api) == shape(api)
    assert set(Message.objects.filter(owner=other_owner).values_list("imported_from", flat=True)) == {"dellm"}
    again = run_import(other_owner, export)
    assert (again.messages_imported, again.edges_created) == (0, 0)


def export_of(api_client) -> dict:
    return json.loads(b"".join(api_client.get("/api/export/").streaming_content))


def test_reimporting_your_own_export_adds_nothing_and_brings_back_nothing_deleted(owner, api):
    paris, tea = make_thread(owner, "Paris"), make_thread(owner, "Tea")
    u1 = make_message(paris, "I live in Paris")
    a1 = make_message(paris, "Paris, noted", role="assistant")
    u2 = make_message(tea, "I like green tea")
    a2 = make_message(tea, "Green tea, noted", role="assistant")
    make_edge(u1, a1, rank=0, score=1.0)
    make_edge(u2, a2, rank=0, score=1.0)
    document = export_of(api)
    progress = run_import(owner, document)
    assert (progress.messages_imported, progress.messages_skipped, progress.edges_created) == (0, 0, 0)
    assert (progress.threads, progress.errors) == ([], [])

    purge = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[u1.pk])
    deletion_confirm(deletion_id=purge.pk, owner_id=owner.pk, confirmed_by=owner)
    soft = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[u2.pk])
    deletion_confirm(deletion_id=soft.pk, owner_id=owner.pk, confirmed_by=owner)
    before = export_of(api)
    # The old export, grown by two new messages of the Paris thread: one quotes u1, one follows it.
    document["messages"] += [
        {"id": a2.pk + 100, "thread": paris.pk, "seq": 90, "role": "assistant", "content": "You live in Paris"},
        {"id": a2.pk + 101, "thread": paris.pk, "seq": 91, "role": "summary", "content": "Lives in Paris"},
    ]
    document["edges"].append({"source": u1.pk, "target": a2.pk + 100, "rank": 0, "score": 1.0, "signal": ""})
    progress = run_import(owner, document)
    assert (progress.messages_imported, progress.messages_skipped, progress.edges_created) == (0, 2, 0)
    assert progress.errors == []
    assert dict(Message.objects.filter(owner=owner).values_list("pk", "status")) == {
        u1.pk: "purged",
        a1.pk: "purged",
        u2.pk: "deleted",
        a2.pk: "deleted",
    }
    assert not Thread.objects.filter(owner=owner, source="dellm").exists()
    assert not Message.objects.filter(owner=owner, content__contains="Paris").exists()
    assert export_of(api)["messages"] == before["messages"] == []


def test_an_export_of_another_server_with_the_same_ids_is_imported_not_matched(owner, api):
    first = make_thread(owner, "Paris")
    u1 = make_message(first, "I live in Paris")
    document = export_of(api)
    # The same id, thread and seq on another server, written at another time.
    document["messages"][0]["created_at"] = "2020-01-01T00:00:00Z"
    progress = run_import(owner, document)
    assert (progress.messages_imported, progress.errors) == (1, [])
    assert by_source(owner)[f"alice:{u1.pk}"].content == "I live in Paris"


def test_a_dellm_file_without_edges_follows_the_chain_rule(owner):
    roles = ["system", "user", "assistant", "user", "assistant"]
    document = {
        "username": "someone",
        "threads": [{"id": 1, "title": "Lisbon"}],
        "messages": [
            {"id": index + 1, "thread": 1, "seq": index + 1, "role": role, "content": f"{role} {index + 1}"}
            for index, role in enumerate(roles)
        ],
        "edges": [],
    }
    progress = run_import(owner, document)
    assert (progress.messages_imported, progress.edges_created) == (5, 4)
    rows = {int(key.split(":")[1]): message for key, message in by_source(owner).items()}
    edges = ContextEdge.objects.filter(owner=owner).values_list("source_id", "target_id", "rank", "signal")
    assert set(edges) == {
        (rows[1].pk, rows[3].pk, 1, "transcript"),
        (rows[2].pk, rows[3].pk, 0, "transcript"),
        (rows[3].pk, rows[5].pk, 1, "transcript"),
        (rows[4].pk, rows[5].pk, 0, "transcript"),
    }
    deletion = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[rows[2].pk])
    assert deletion.dependent_ids == [rows[3].pk, rows[5].pk]
    deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)
    # Grown by a reply with no edges: it follows the purged u2, so it is skipped; a new user message lands.
    document["messages"] += [
        {"id": 6, "thread": 1, "seq": 6, "role": "user", "content": "user 6"},
        {"id": 7, "thread": 1, "seq": 7, "role": "assistant", "content": "assistant 7"},
    ]
    progress = run_import(owner, document)
    assert (progress.messages_imported, progress.messages_skipped, progress.edges_created) == (1, 1, 0)
    assert Message.objects.filter(owner=owner, status__in=Message.LIVE).count() == 3
    assert taint_violations(owner_id=owner.pk) == []


def test_dellm_edge_scores_mixing_whole_numbers_and_floats_import(owner):
    document = {
        "username": "someone",
        "threads": [{"id": 1}],
        "messages": [
            {"id": 1, "thread": 1, "seq": 1, "role": "user", "content": "u"},
            {"id": 2, "thread": 1, "seq": 2, "role": "user", "content": "v"},
            {"id": 3, "thread": 1, "seq": 3, "role": "assistant", "content": "a"},
        ],
        "edges": [{"source": 1, "target": 3, "score": 1}, {"source": 2, "target": 3, "score": 0.5, "rank": 1}],
    }
    progress = run_import(owner, document)
    assert (progress.messages_imported, progress.edges_created, progress.errors) == (3, 2, [])
    assert sorted(ContextEdge.objects.filter(owner=owner).values_list("rank", "score")) == [(0, 1.0), (1, 0.5)]


def test_history_parse_limits_are_validation_errors(settings):
    settings.DELLM_IMPORT_MAX_CONVERSATIONS = 1
    with pytest.raises(ValidationFailed) as caught:
        history_parse(data=json.dumps(CHATGPT).encode())
    assert caught.value.fields == {"conversations": "The file has 2 conversations; at most 1 can be imported at once."}
    settings.DELLM_IMPORT_MAX_BYTES = 10
    with pytest.raises(PayloadTooLarge):
        history_parse(data=json.dumps(CHATGPT).encode())


def test_a_dellm_file_whose_edges_form_a_cycle_is_refused_whole_with_a_clear_error(owner):
    document = {
        "username": "someone",
        "threads": [{"id": 1, "title": "Loop"}],
        "messages": [
            {"id": 1, "thread": 1, "seq": 1, "role": "user", "content": "user 1"},
            {"id": 2, "thread": 1, "seq": 2, "role": "assistant", "content": "assistant 2"},
            {"id": 3, "thread": 1, "seq": 3, "role": "assistant", "content": "assistant 3"},
        ],
        "edges": [
            {"source": 1, "target": 2, "rank": 0, "score": 1.0},
            {"source": 3, "target": 2, "rank": 0, "score": 1.0},
            {"source": 2, "target": 3, "rank": 0, "score": 1.0},
        ],
    }
    progress = run_import(owner, document)
    assert (progress.messages_imported, progress.conversations_failed) == (0, 1)
    assert progress.errors == [
        {
            "conversation": "someone:thread:1",
            "field": "messages",
            "message": "The file's edges form a cycle, which 2 of its messages are on or derive from: a message "
            "cannot derive from itself.",
        }
    ]
    assert not Message.objects.filter(owner=owner).exists()
    assert not Thread.objects.filter(owner=owner).exists()


WEATHER = [{"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Grenoble"}'}]


def tool_conversation(owner):
    """A memory, the question, the model's tool call, the client's result and the answer, as `/v1` stores them."""
    thread = make_thread(owner, "Via the OpenAI-compatible API")

    def store(role, text, sources=(), **extra):
        return message_store(owner_id=owner.pk, thread_id=thread.pk, role=role, content=text, sources=sources, **extra)

    fact = store("user", "I live in Grenoble", embedding=embed_one("I live in Grenoble"))
    question = store("user", "What is the weather where I live?", embedding=embed_one("the weather"))
    call = store("assistant", "", [Source(id=question.pk), Source(id=fact.pk, rank=1, score=0.8)], tool_calls=WEATHER)
    (result,) = tool_results_store(
        owner_id=owner.pk,
        call_id=call.pk,
        results=[Supplied(role="tool", content="Sunny, 21 C", tool_call_id="call_w1")],
    )
    answer_sources = [Source(id=question.pk), Source(id=result.pk, rank=2, signal="tool")]
    store("assistant", "It is sunny in Grenoble.", answer_sources)


def export_shape(api_client):
    """An account's export with its ids replaced by positions: messages with their tool fields, and edges."""
    document = export_of(api_client)
    position = {m["id"]: i for i, m in enumerate(document["messages"])}
    messages = [(m["role"], m["content"], m["tool_calls"], m["tool_call_id"]) for m in document["messages"]]
    edges = sorted(
        (position[e["source"]], position[e["target"]], e["rank"], e["score"], e["signal"]) for e in document["edges"]
    )
    return messages, edges


def test_tool_steps_survive_dellms_export_and_import_and_go_with_the_memory(owner, other_owner, api, other_api):
    tool_conversation(owner)
    exported = export_of(api)
    assert [(m["tool_calls"], m["tool_call_id"]) for m in exported["messages"]] == [
        (None, ""),
        (None, ""),
        (WEATHER, ""),
        (None, "call_w1"),
        (None, ""),
    ]
    export = json.dumps(exported).encode()

    progress = run_import(other_owner, export)

    assert (progress.messages_imported, progress.messages_skipped, progress.edges_created) == (5, 0, 5)
    assert progress.errors == []
    assert export_shape(other_api) == export_shape(api)
    assert export_shape(api)[1] == [
        (0, 2, 1, 0.8, ""),
        (1, 2, 0, 0.0, ""),
        (1, 4, 0, 0.0, ""),
        (2, 3, 0, 1.0, "tool"),
        (3, 4, 2, 0.0, "tool"),
    ]
    copies = list(Message.objects.filter(owner=other_owner).order_by("seq"))
    # Tool steps are not memory: never embedded, as at the /v1 door; the rest is.
    assert [m.embedding is not None for m in copies] == [True, True, False, False, True]
    # Again, into either account: nothing new.
    for account in (other_owner, owner):
        again = run_import(account, export)
        assert (again.messages_imported, again.messages_skipped, again.edges_created, again.errors) == (0, 0, 0, [])
    assert Message.objects.filter(owner=owner).count() == 5

    purge = deletion_preview(owner=other_owner, actor=other_owner, mode="purge", ids=[copies[0].pk])
    deletion_confirm(deletion_id=purge.pk, owner_id=other_owner.pk, confirmed_by=other_owner)

    # The eraser empties a purged call's calls (to []) as it empties text.
    rows = Message.objects.filter(owner=other_owner).order_by("seq")
    assert list(rows.values_list("status", "content", "tool_calls", "tool_call_id")) == [
        ("purged", "", None, ""),
        ("active", "What is the weather where I live?", None, ""),
        ("purged", "", [], ""),
        ("purged", "", None, ""),
        ("purged", "", None, ""),
    ]


def test_tool_steps_a_v1_client_supplied_survive_dellms_export_and_import(owner, other_owner, api, other_api):
    # Another model's call and its result, handed in a /v1 transcript: replies written elsewhere, linked by
    # `transcript` edges (docs/OPENAI.md, "Replays"), not by `tool` edges; the import takes them as they are.
    thread = make_thread(owner, "Via the OpenAI-compatible API")
    question = message_store(owner_id=owner.pk, thread_id=thread.pk, role="user", content="Weather in Grenoble?")
    transcripts_store(
        owner_id=owner.pk,
        branches=[
            Branch(
                thread_id=thread.pk,
                items=[
                    question.pk,
                    Supplied(role="assistant", content="", tool_calls=WEATHER),
                    Supplied(role="tool", content="Sunny, 21 C", tool_call_id="call_w1"),
                    Supplied(role="assistant", content="It is sunny."),
                    Supplied(role="user", content="Thanks"),
                ],
            )
        ],
    )
    assert {signal for _, _, _, _, signal in export_shape(api)[1]} == {"transcript"}

    progress = run_import(other_owner, json.dumps(export_of(api)).encode())

    assert (progress.messages_imported, progress.errors) == (5, [])
    assert export_shape(other_api) == export_shape(api)


def test_a_supplied_tool_result_still_names_a_call_of_its_thread(owner):
    document = dellm_tool_file({}, {"tool_call_id": "call_elsewhere"})
    document["edges"][1]["signal"] = "transcript"
    progress = run_import(owner, document)
    assert [error["field"] for error in progress.errors] == ["messages[2].tool_call_id"]
    document["messages"][2]["tool_call_id"] = "call_w1"
    assert run_import(owner, document).errors == []


def dellm_tool_file(call: dict, result: dict) -> dict:
    """A DeLLM file of a tool call and its result (either message's fields overridden)."""
    return {
        "username": "someone",
        "threads": [{"id": 1, "title": "Weather"}],
        "messages": [
            {"id": 1, "thread": 1, "seq": 1, "role": "user", "content": "Weather?"},
            {"id": 2, "thread": 1, "seq": 2, "role": "assistant", "content": "", "tool_calls": WEATHER, **call},
            {"id": 3, "thread": 1, "seq": 3, "role": "tool", "content": "Sunny", "tool_call_id": "call_w1", **result},
        ],
        "edges": [
            {"source": 1, "target": 2, "rank": 0, "score": 1.0, "signal": ""},
            {"source": 2, "target": 3, "rank": 0, "score": 1.0, "signal": "tool"},
        ],
    }


def call_of(**fields) -> list[dict]:
    return [{**WEATHER[0], **fields}]


@pytest.mark.parametrize(
    ("call", "result", "field", "message"),
    [
        ({"tool_calls": []}, {}, "messages[1].tool_calls", "must be a non-empty list or null"),
        ({"tool_calls": {"id": "x"}}, {}, "messages[1].tool_calls", "must be a non-empty list or null"),
        ({"tool_calls": ["call_w1"]}, {}, "messages[1].tool_calls[0]", "is not an object"),
        ({"tool_calls": call_of(id="")}, {}, "messages[1].tool_calls[0].id", "must be a string of 1 to 200 characters"),
        (
            {"tool_calls": call_of(id="c" * 201)},
            {},
            "messages[1].tool_calls[0].id",
            "must be a string of 1 to 200 characters",
        ),
        ({"tool_calls": WEATHER * 2}, {}, "messages[1].tool_calls[1].id", "names a call listed before"),
        (
            {"tool_calls": call_of(name="get weather")},
            {},
            "messages[1].tool_calls[0].name",
            "is not 1 to 64 letters, digits, underscores or dashes",
        ),
        (
            {"tool_calls": call_of(arguments={"city": "x"})},
            {},
            "messages[1].tool_calls[0].arguments",
            "is not a string",
        ),
        ({"tool_calls": call_of(arguments="\x00")}, {}, "messages[1].tool_calls[0].arguments", "holds a NUL character"),
        (
            {"tool_calls": call_of(arguments="x" * 101)},
            {},
            "messages[1].tool_calls",
            "has arguments of more than 100 characters in all",
        ),
        (
            {"tool_calls": [call_of(id=f"c{i}")[0] for i in range(129)]},
            {},
            "messages[1].tool_calls",
            "has more than 128 calls",
        ),
        ({"tool_calls": None}, {}, "messages[1].content", "is empty"),
        ({"tool_call_id": "call_w1"}, {}, "messages[1].tool_call_id", "is only a tool message's"),
        ({}, {"tool_calls": WEATHER}, "messages[2].tool_calls", "is only an assistant message's"),
        ({}, {"tool_call_id": None}, "messages[2].tool_call_id", "must be a string of 1 to 200 characters"),
        (
            {},
            {"tool_call_id": "call_zz"},
            "messages[2].tool_call_id",
            "names no call of a reply with a tool edge to this message",
        ),
    ],
)
def test_dellm_tool_steps_of_a_bad_shape_refuse_the_file_naming_the_field(owner, call, result, field, message):
    progress = history_import(
        owner_id=owner.pk,
        parsed=parse_file(json.dumps(dellm_tool_file(call, result)).encode(), limits=Limits(max_message_chars=100)),
    )
    assert progress.errors == [{"conversation": "someone (the whole export)", "field": field, "message": message}]
    assert not Message.objects.filter(owner=owner).exists()


def test_a_dellm_tool_result_without_its_tool_edge_is_refused(owner):
    document = dellm_tool_file({}, {})
    document["edges"][1]["signal"] = ""
    progress = run_import(owner, document)
    assert [error["field"] for error in progress.errors] == ["messages[2].tool_call_id"]
    good = run_import(owner, dellm_tool_file({}, {}))
    assert (good.messages_imported, good.edges_created, good.errors) == (3, 2, [])
    assert list(
        Message.objects.filter(owner=owner).order_by("seq").values_list("role", "tool_calls", "tool_call_id")
    ) == [
        ("user", None, ""),
        ("assistant", WEATHER, ""),
        ("tool", None, "call_w1"),
    ]
