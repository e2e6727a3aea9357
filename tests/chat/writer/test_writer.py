"""The one writer's rules: live only if the sources are live; supplied replies derive from everything before them."""

import pytest
from django.db import DataError, connection
from django.test.utils import CaptureQueriesContext

from chat.index.embeddings import get_embedder
from chat.lineage import ProvenanceCycle, transcript_sources
from chat.models import ContextEdge, Message
from chat.writer import (
    Branch,
    GraphEdge,
    GraphMessage,
    Source,
    SourcesRemoved,
    Supplied,
    graph_store,
    message_store,
    messages_remove,
    messages_restore,
    tool_results_store,
    transcripts_store,
)
from chat.writer import messages as writer_messages
from provenance.dependents import dep_ids, taint_violations
from tests.factories import make_edge, make_message, make_thread


def edges_of(owner) -> set[tuple[int, int]]:
    return set(ContextEdge.objects.filter(owner=owner).values_list("source_id", "target_id"))


def test_transcript_sources_link_each_chain_reply_to_the_previous_one_and_what_came_since():
    branch = [(1, False), (2, True), (3, False), (4, False), (5, True), (6, True), (7, False)]
    assert transcript_sources(branch) == [(1, 2), (2, 5), (3, 5), (4, 5), (5, 6)]
    assert transcript_sources([(1, True), (2, False)]) == []
    assert transcript_sources([]) == []


def test_a_message_is_stored_only_if_every_source_is_live(owner, thread):
    question = make_message(thread, "Where do I live?")
    fact = make_message(thread, "I live in Paris", status="deleted")
    before = Message.objects.count()
    with pytest.raises(SourcesRemoved) as refused:
        message_store(
            owner_id=owner.pk,
            thread_id=thread.pk,
            role="assistant",
            content="You live in Paris.",
            sources=[Source(id=question.pk, rank=0, score=1.0), Source(id=fact.pk, rank=1, score=0.4)],
        )
    assert refused.value.ids == [fact.pk]
    assert (Message.objects.count(), edges_of(owner)) == (before, set())

    expiring = make_message(thread, "I live in Lyon until May", status="expiring")
    reply = message_store(
        owner_id=owner.pk,
        thread_id=thread.pk,
        role="assistant",
        content="You live in Lyon.",
        sources=[Source(id=question.pk, rank=0, score=1.0), Source(id=expiring.pk, rank=1, score=0.4, signal="both")],
    )
    assert (reply.seq, reply.status) == (4, "active")
    assert list(
        ContextEdge.objects.filter(target=reply).order_by("rank").values_list("source_id", "rank", "score", "signal")
    ) == [(question.pk, 0, 1.0, ""), (expiring.pk, 1, 0.4, "both")]


@pytest.mark.django_db(transaction=True)
def test_a_stored_row_holds_what_was_given_and_a_value_too_long_for_its_column_is_refused(owner, thread):
    """One message is written by its own INSERT (chat.writer.indexes.message_insert_indexed), not Django's."""
    calls = [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]
    vector = [1.0] + [0.0] * (get_embedder().dim - 1)
    given = message_store(
        owner_id=owner.pk, thread_id=thread.pk, role="assistant", content="", tool_calls=calls, embedding=vector
    )
    row = Message.objects.get(pk=given.pk)
    assert (row.seq, row.role, row.content, row.status, row.tool_calls, list(row.embedding)) == (
        1,
        "assistant",
        "",
        "active",
        calls,
        vector,
    )
    assert (row.embedding_model, row.created_at, row.updated_at) == (
        get_embedder().model_name,
        given.created_at,
        given.updated_at,
    )
    plain = message_store(owner_id=owner.pk, thread_id=thread.pk, role="user", content="hello")
    # No tool calls is SQL NULL (not JSON null), which every "not a tool step" filter reads.
    assert Message.objects.filter(
        pk=plain.pk, tool_calls__isnull=True, embedding__isnull=True, embedding_model="", tool_call_id="", place=None
    ).exists()
    # As Django's INSERT would: refused, not cut to the column's length, and nothing stored.
    with pytest.raises(DataError, match="too long"):
        message_store(
            owner_id=owner.pk,
            thread_id=thread.pk,
            role="user",
            content="x",
            embedding=vector,
            embedding_model="m" * 101,
        )
    assert Message.objects.filter(owner=owner).count() == 2


def test_another_owners_message_is_no_source(owner, other_owner, thread):
    theirs = make_message(make_thread(other_owner), "their secret")
    with pytest.raises(SourcesRemoved) as refused:
        message_store(
            owner_id=owner.pk, thread_id=thread.pk, role="assistant", content="x", sources=[Source(theirs.pk)]
        )
    assert refused.value.ids == [theirs.pk]
    assert not Message.objects.filter(owner=owner).exists()


def test_a_supplied_reply_after_a_removed_message_is_skipped_and_so_is_every_later_one(owner, thread):
    pin = make_message(thread, "My bank PIN hint is ORCHID-5150.")
    make_message(thread, "Noted.", role="assistant")
    messages_remove(owner_id=owner.pk, ids=[pin.pk], deletion_id=1, purge=True)
    stored_ids = list(Message.objects.filter(thread=thread).order_by("seq").values_list("pk", flat=True))
    result = transcripts_store(
        owner_id=owner.pk,
        branches=[
            Branch(
                thread_id=thread.pk,
                items=[
                    *stored_ids,
                    Supplied(role="user", content="What was my hint?"),
                    Supplied(role="assistant", content="Use ORCHID-5150, the hint you gave me."),
                    Supplied(role="user", content="Thanks."),
                    Supplied(role="assistant", content="You are welcome."),
                ],
            )
        ],
    )
    assert ([m.content for m in result.created], result.skipped, result.edges) == (
        ["What was my hint?", "Thanks."],
        2,
        0,
    )
    assert not Message.objects.filter(content__contains="ORCHID").exists()
    assert taint_violations(owner_id=owner.pk) == []


def test_supplied_replies_get_linear_edges_with_the_quadratic_rules_dep(owner, thread):
    texts = ["u1", "a1", "u2", "a2", "a3", "u3", "u4", "a4"]
    result = transcripts_store(
        owner_id=owner.pk,
        branches=[
            Branch(
                thread_id=thread.pk,
                items=[Supplied(role="user" if t.startswith("u") else "assistant", content=t) for t in texts],
            )
        ],
    )
    ids = {m.content: m.pk for m in result.created}
    assert [m.content for m in result.created] == texts
    linear = {
        ("u1", "a1"),
        ("a1", "a2"),
        ("u2", "a2"),
        ("a2", "a3"),
        ("a3", "a4"),
        ("u3", "a4"),
        ("u4", "a4"),
    }
    assert edges_of(owner) == {(ids[s], ids[t]) for s, t in linear}
    assert result.edges == len(linear)
    assert set(ContextEdge.objects.filter(owner=owner).values_list("signal", flat=True)) == {"transcript"}
    # Dep of every message is what an edge from every earlier message would give.
    for index, text in enumerate(texts):
        quadratic = {t for t in texts[index + 1 :] if t.startswith("a")} | {text}
        assert dep_ids(owner_id=owner.pk, roots=[ids[text]]) == {ids[t] for t in quadratic}

    # Continued later (the next request, the next import): two edges, from the stored chain reply on.
    more = transcripts_store(
        owner_id=owner.pk,
        branches=[
            Branch(
                thread_id=thread.pk,
                items=[*ids.values(), Supplied(role="user", content="u5"), Supplied(role="assistant", content="a5")],
            )
        ],
    )
    u5, a5 = more.created
    assert set(ContextEdge.objects.filter(target=a5).values_list("source_id", "rank")) == {(u5.pk, 0), (ids["a4"], 1)}
    assert a5.pk in dep_ids(owner_id=owner.pk, roots=[ids["u1"]])


def test_a_turn_reply_is_no_chain_reply_the_next_supplied_one_reaches_back_past_it(owner, thread):
    question = make_message(thread, "q")
    reply = make_message(thread, "DeLLM's own reply", role="assistant")
    make_edge(question, reply, rank=0, score=1.0)
    result = transcripts_store(
        owner_id=owner.pk,
        branches=[Branch(thread_id=thread.pk, items=[question.pk, reply.pk, Supplied(role="assistant", content="a")])],
    )
    [supplied] = result.created
    assert set(ContextEdge.objects.filter(target=supplied).values_list("source_id", "rank")) == {
        (reply.pk, 0),
        (question.pk, 1),
    }


def test_graph_store_keeps_only_messages_whose_sources_are_live_in_one_topological_pass(owner, thread):
    gone = make_message(thread, "removed", status="deleted")
    kept = make_message(thread, "kept")

    def new(key):
        return GraphMessage(key=key, conversation="c", supplied=Supplied(role="assistant", content=key))

    # Listed out of topological order: b depends on c, which comes later.
    messages = [new("a"), new("b"), new("c"), new("d"), new("x"), new("y")]
    edges = [
        GraphEdge(source="kept", target="a", rank=1, score=0.5),
        GraphEdge(source="c", target="b", rank=1, score=0.5),
        GraphEdge(source="a", target="c", rank=1, score=0.5),
        GraphEdge(source="gone", target="d", rank=1, score=0.5),
        GraphEdge(source="d", target="x", rank=1, score=0.5),
        GraphEdge(source="nowhere", target="y", rank=1, score=0.5),
    ]
    asked = []
    result = graph_store(
        owner_id=owner.pk,
        messages=messages,
        existing={"gone": gone.pk, "kept": kept.pk},
        edges=edges,
        conversations={"c": ["gone", "kept", *(m.key for m in messages)]},
        thread_for=lambda conversation: asked.append(conversation) or thread.pk,
    )
    assert ([m.content for m in result.created], result.skipped, result.edges) == (["a", "b", "c"], 3, 3)
    ids = {m.content: m.pk for m in result.created}
    assert edges_of(owner) == {(kept.pk, ids["a"]), (ids["a"], ids["c"]), (ids["c"], ids["b"])}
    assert [m.seq for m in result.created] == [3, 4, 5]
    assert asked == ["c", "c", "c"]


def test_graph_store_refuses_edges_that_form_a_cycle_and_writes_nothing(owner, thread):
    kept = make_message(thread, "kept")

    def new(key):
        return GraphMessage(key=key, conversation="c", supplied=Supplied(role="user", content=key))

    # a lands on its own; b -> c -> b can never be ordered after its sources.
    edges = [
        GraphEdge(source="kept", target="a", rank=1, score=0.5),
        GraphEdge(source="b", target="c", rank=1, score=0.5),
        GraphEdge(source="c", target="b", rank=1, score=0.5),
    ]
    with pytest.raises(ProvenanceCycle) as refused:
        graph_store(
            owner_id=owner.pk,
            messages=[new("a"), new("b"), new("c")],
            existing={"kept": kept.pk},
            edges=edges,
            conversations={"c": ["kept", "a", "b", "c"]},
            thread_for=lambda conversation: thread.pk,
        )
    assert (refused.value.status, refused.value.fields) == (400, {"edges": "form a cycle"})
    assert list(Message.objects.filter(owner=owner).values_list("content", flat=True)) == ["kept"]


def test_graph_store_a_reply_no_edge_points_at_derives_from_everything_before_it(owner, thread):
    u1 = make_message(thread, "u1")
    a1 = make_message(thread, "a1", role="assistant")
    ContextEdge.objects.create(owner=owner, source=u1, target=a1, rank=0, score=0.0, signal="transcript")

    def new(key, role):
        return GraphMessage(key=key, conversation="c", supplied=Supplied(role=role, content=key))

    messages = [new("u2", "user"), new("s", "system"), new("a2", "assistant")]
    result = graph_store(
        owner_id=owner.pk,
        messages=messages,
        existing={"u1": u1.pk, "a1": a1.pk},
        edges=[],
        conversations={"c": ["u1", "a1", "u2", "s", "a2"]},
        thread_for=lambda conversation: thread.pk,
    )
    ids = {m.content: m.pk for m in result.created}
    assert (sorted(ids), result.skipped, result.edges) == (["a2", "s", "u2"], 0, 3)
    # Linear: a1 already derives from u1; the system prompt and u2 derive from nothing.
    assert set(ContextEdge.objects.filter(target_id=ids["a2"]).values_list("source_id", "rank", "signal")) == {
        (a1.pk, 2, "transcript"),
        (ids["u2"], 1, "transcript"),
        (ids["s"], 0, "transcript"),
    }
    assert ContextEdge.objects.filter(target_id__in=[ids["u2"], ids["s"]]).count() == 0
    messages_remove(owner_id=owner.pk, ids=[u1.pk], deletion_id=9, purge=False)
    again = graph_store(
        owner_id=owner.pk,
        messages=[new("a3", "summary")],
        existing={"u1": u1.pk, "a1": a1.pk},
        edges=[],
        conversations={"c": ["u1", "a1", "a3"]},
        thread_for=lambda conversation: thread.pk,
    )
    assert (again.created, again.skipped) == ([], 1)


def test_restoring_a_message_whose_source_is_removed_elsewhere_is_refused(owner, thread):
    fact = make_message(thread, "fact")
    reply = make_message(thread, "reply", role="assistant")
    make_edge(fact, reply)
    assert messages_remove(owner_id=owner.pk, ids=[reply.pk], deletion_id=7, purge=False) == [reply.pk]
    assert messages_remove(owner_id=owner.pk, ids=[fact.pk], deletion_id=8, purge=False) == [fact.pk]
    with pytest.raises(SourcesRemoved) as refused:
        messages_restore(owner_id=owner.pk, ids=[reply.pk], deletion_id=7)
    assert refused.value.ids == [fact.pk]
    assert messages_restore(owner_id=owner.pk, ids=[fact.pk, reply.pk], deletion_id=8) == 1
    assert messages_restore(owner_id=owner.pk, ids=[reply.pk], deletion_id=7) == 1
    assert set(Message.objects.values_list("status", flat=True)) == {"active"}


def test_a_purge_leaves_a_tombstone_and_is_never_restored(owner, thread):
    message = make_message(thread, "secret", embedding=[1.0, 0.0])
    assert messages_remove(owner_id=owner.pk, ids=[message.pk], deletion_id=3, purge=True) == [message.pk]
    assert messages_remove(owner_id=owner.pk, ids=[message.pk], deletion_id=4, purge=True) == []
    message.refresh_from_db()
    assert (message.status, message.content, message.embedding, message.deleted_by_id) == ("purged", "", None, 3)
    assert messages_restore(owner_id=owner.pk, ids=[message.pk], deletion_id=3) == 0
    message.refresh_from_db()
    assert message.status == "purged"


def test_graph_store_a_100k_chain_onto_a_deleted_message_stores_none_of_it(owner, thread):
    # The review's file: the old fixpoint took a round per message here (about 25 minutes, under the lock).
    gone = make_message(thread, "deleted since", status="deleted")
    size = 100_000
    messages = [
        GraphMessage(key=index, conversation="c", supplied=Supplied(role="user", content=f"m{index}"))
        for index in range(1, size + 1)
    ]
    edges = [GraphEdge(source=index - 1, target=index, rank=0, score=1.0) for index in range(1, size + 1)]
    result = graph_store(
        owner_id=owner.pk,
        messages=messages,
        existing={0: gone.pk},
        edges=edges,
        conversations={"c": list(range(size + 1))},
        thread_for=lambda conversation: thread.pk,
    )
    assert (result.created, result.skipped, result.edges) == ([], size, 0)
    assert Message.objects.filter(owner=owner).count() == 1


CALLS = [{"id": "c1", "name": "get_weather", "arguments": "{}"}, {"id": "c2", "name": "get_time", "arguments": "{}"}]


def test_a_tool_result_derives_from_the_call_that_asked_for_it_and_only_while_it_is_live(owner, thread):
    question = make_message(thread, "Weather and time?")
    call = message_store(
        owner_id=owner.pk,
        thread_id=thread.pk,
        role="assistant",
        content="",
        sources=[Source(id=question.pk)],
        tool_calls=CALLS,
    )
    results = tool_results_store(
        owner_id=owner.pk,
        call_id=call.pk,
        results=[
            Supplied(role="tool", content="12:00", tool_call_id="c2"),
            Supplied(role="tool", content="Sunny", tool_call_id="c1"),
        ],
    )
    assert [(m.role, m.content, m.tool_call_id, m.embedding) for m in results] == [
        ("tool", "12:00", "c2", None),
        ("tool", "Sunny", "c1", None),
    ]
    edges = ContextEdge.objects.filter(source=call).order_by("target_id")
    assert list(edges.values_list("target_id", "rank", "signal")) == [
        (results[0].pk, 1, "tool"),
        (results[1].pk, 0, "tool"),
    ]
    # Forgetting the question takes the call and both results.
    assert dep_ids(owner_id=owner.pk, roots=[question.pk]) == {question.pk, call.pk, *(m.pk for m in results)}

    with pytest.raises(ValueError):
        tool_results_store(
            owner_id=owner.pk, call_id=call.pk, results=[Supplied(role="tool", content="x", tool_call_id="c9")]
        )
    with pytest.raises(ValueError):
        tool_results_store(
            owner_id=owner.pk, call_id=call.pk, results=[Supplied(role="user", content="x", tool_call_id="c1")]
        )
    messages_remove(owner_id=owner.pk, ids=[call.pk], deletion_id=1, purge=True)
    with pytest.raises(SourcesRemoved):
        tool_results_store(
            owner_id=owner.pk, call_id=call.pk, results=[Supplied(role="tool", content="late", tool_call_id="c1")]
        )
    assert Message.objects.filter(role="tool").count() == 2
    call.refresh_from_db()
    assert (call.status, call.content, call.tool_calls) == ("purged", "", [])


def test_long_messages_are_inserted_in_statements_of_bounded_text(owner, thread, monkeypatch):
    """Django binds on the client: one INSERT of a conversation's long messages is spelt out whole in
    the worker, several times over. Statements of at most INSERT_CHARS of text each, one transaction."""
    monkeypatch.setattr(writer_messages, "INSERT_CHARS", 10_000)
    texts = [f"{n} " + "word " * 600 for n in range(7)]
    with CaptureQueriesContext(connection) as queries:
        result = transcripts_store(
            owner_id=owner.pk,
            branches=[
                Branch(
                    thread_id=thread.pk,
                    items=[
                        Supplied(role="user" if n % 2 == 0 else "assistant", content=t) for n, t in enumerate(texts)
                    ],
                )
            ],
        )
    inserts = [q["sql"] for q in queries if q["sql"].startswith(f'INSERT INTO "{Message._meta.db_table}"')]
    assert [sum(text in sql for text in texts) for sql in inserts] == [3, 3, 1]
    assert [m.content for m in result.created] == texts
    assert list(Message.objects.filter(thread=thread).order_by("seq").values_list("content", flat=True)) == texts
    assert all(m.pk is not None for m in result.created)
    assert result.edges == 1 + 2 + 2
