import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from chat.index.embeddings import get_embedder
from chat.llm import OfflineResponder
from chat.models import Message, Turn
from chat.turns.run import context_retrieve, turn_run
from chat.turns.start import turn_create
from chat.writer import vectors
from core.db.locks import owner_lock
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.dependents import dep_ids, taint_violations
from tests.factories import make_message, make_thread


def chat(thread, text: str) -> Turn:
    turn = turn_create(thread=thread, content=text, enqueue=False)
    return turn_run(turn_id=turn.pk, owner_id=turn.owner_id)


def live_texts(owner) -> list[str]:
    return list(Message.objects.filter(owner=owner, status__in=Message.LIVE).values_list("content", flat=True))


@pytest.mark.django_db(transaction=True)
def test_turn_commits_reply_with_edges_from_its_context(owner, thread, monkeypatch):
    first = chat(thread, "I live in Paris and work as a nurse.")
    assert first.status == Turn.Status.DONE
    assert first.reply.content == "Noted — home city: you live in Paris; work and job: you work as a nurse."
    assert list(first.reply.in_edges.values_list("source_id", "rank")) == [(first.user_message_id, 0)]

    retrieved = []
    retrieve = context_retrieve
    monkeypatch.setattr("chat.turns.run.context_retrieve", lambda **kw: retrieved.extend(retrieve(**kw)) or retrieved)
    second = chat(thread, "Where do I live?")
    assert first.user_message_id in {item.id for item in retrieved}
    edges = second.reply.in_edges.order_by("rank").values_list("owner_id", "source_id", "rank", "score", "signal")
    assert list(edges) == [(owner.pk, second.user_message_id, 0, 1.0, "")] + [
        (owner.pk, item.id, rank, pytest.approx(item.score), item.signal)
        for rank, item in enumerate(retrieved, start=1)
    ]
    # "live" in both messages, and similar: the fact came by both signals.
    assert [item.signal for item in retrieved if item.id == first.user_message_id] == ["both"]
    assert "I live in Paris" in second.reply.content
    assert [m.seq for m in Message.objects.filter(owner=owner)] == [1, 2, 3, 4]


@pytest.mark.django_db(transaction=True)
def test_paris_example_forgets_paris_and_keeps_the_rest(owner, thread):
    chat(thread, "I live in Paris.")
    chat(thread, "My favourite food is sushi.")
    chat(thread, "Where do I live?")
    chat(thread, "What is my favourite food?")
    root = Message.objects.get(owner=owner, content="I live in Paris.")
    expected = dep_ids(owner_id=owner.pk, roots=[root.pk])

    preview = deletion_preview(owner=owner, actor=owner, mode="purge", exact="I live in Paris")
    done = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    assert set(done.deleted_ids) == expected | set(done.matched_ids)
    assert not [text for text in live_texts(owner) if "Paris" in text]
    assert taint_violations(owner_id=owner.pk) == []
    again = chat(thread, "What is my favourite food?")
    assert "sushi" in again.reply.content
    where = chat(thread, "Where do I live?")
    assert "Paris" not in where.reply.content


# The statements of a turn's run, commit included: 34 before the question was
# embedded from the row in hand and the reply before its commit, 18 before the
# question was stored with its vector, planner settings went with their
# statement and the reply was inserted with its index (docs/subsystems/turns.md); one more reads whether the
# owner has facts (a context with facts is chosen from twice k items, chat/retrieval/context.py).
TURN_STATEMENTS = 13


@pytest.mark.django_db(transaction=True)
def test_a_turn_stores_both_vectors_in_a_bounded_number_of_statements(owner, thread, monkeypatch):
    chat(thread, "I live in Paris and work as a nurse.")
    turn = turn_create(thread=thread, content="Where do I live?", enqueue=False)
    # The question is stored with its vector: the run writes it no more.
    assert Message.objects.get(pk=turn.user_message_id).embedding is not None

    def batch_embed(**kwargs):
        raise AssertionError("a turn's two messages are embedded one by one, not read back in a batch")

    monkeypatch.setattr("chat.turns.run.messages_index_embed", batch_embed)
    with CaptureQueriesContext(connection) as queries:
        done = turn_run(turn_id=turn.pk, owner_id=owner.pk)
    assert (done.status, done.error) == (Turn.Status.DONE, "")
    statements = [query["sql"] for query in queries.captured_queries if query["sql"] not in ("BEGIN", "COMMIT")]
    assert len(statements) <= TURN_STATEMENTS, statements
    for message in Message.objects.filter(pk__in=[done.user_message_id, done.reply_id]):
        expected = get_embedder().embed([message.content])[0]
        assert np.allclose(message.embedding, expected)
        assert message.embedding_model == get_embedder().model_name
    assert done.reply.content.startswith("From what you told me")


@pytest.mark.django_db(transaction=True)
def test_nothing_is_embedded_in_a_transaction_and_a_question_stored_in_one_is_embedded_by_its_turn(
    owner, thread, monkeypatch
):
    inner, seen = get_embedder(), []

    class Watched:
        model_name, local, dim = inner.model_name, True, inner.dim

        def embed(self, texts):
            seen.extend((text, connection.in_atomic_block) for text in texts)
            return inner.embed(texts)

    monkeypatch.setattr(vectors, "get_embedder", Watched)
    # As /v1 stores a transcript and its turn: in one transaction, under the owner's lock.
    with transaction.atomic():
        owner_lock(owner.pk)
        turn = turn_create(thread=thread, content="Where do I live?", enqueue=False)
    assert Message.objects.get(pk=turn.user_message_id).embedding is None
    done = turn_run(turn_id=turn.pk, owner_id=owner.pk)
    assert [text for text, _ in seen] == ["Where do I live?", done.reply.content]
    assert not any(in_transaction for _, in_transaction in seen)
    assert Message.objects.get(pk=turn.user_message_id).embedding is not None


@pytest.mark.django_db(transaction=True)
def test_a_remote_embedder_is_sent_a_reply_only_once_it_is_committed(owner, thread, monkeypatch):
    inner, seen = get_embedder(), []

    class Remote:
        model_name, local, dim = inner.model_name, False, inner.dim

        def embed(self, texts):
            stored = Message.objects.filter(owner=owner, role="assistant", content__in=texts).exists()
            seen.extend((text, stored) for text in texts)
            return inner.embed(texts)

    monkeypatch.setattr(vectors, "get_embedder", Remote)
    done = chat(thread, "I live in Paris.")
    assert [text for text, _ in seen] == ["I live in Paris.", done.reply.content]
    assert seen[1] == (done.reply.content, True)
    assert done.reply.embedding is not None


@pytest.mark.django_db(transaction=True)
def test_turn_rebuilds_context_when_a_deletion_lands_during_generation(owner, thread, monkeypatch):
    fact = chat(thread, "My cat is called Miso.").user_message
    calls = []
    real_complete = OfflineResponder.complete

    def complete_while_deleting(self, *, context, user_message):
        calls.append([item.id for item in context])
        if len(calls) == 1:
            preview = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[fact.pk])
            deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
        return real_complete(self, context=context, user_message=user_message)

    monkeypatch.setattr(OfflineResponder, "complete", complete_while_deleting)
    turn = chat(thread, "What is my cat called?")
    assert fact.pk in calls[0]
    assert fact.pk not in calls[1]
    assert turn.status == Turn.Status.DONE
    assert "Miso" not in turn.reply.content
    assert taint_violations(owner_id=owner.pk) == []


def test_a_run_that_finds_its_turn_committed_by_another_run_drops_its_reply(owner, thread, monkeypatch, caplog):
    turn = turn_create(thread=thread, content="I live in Paris.", enqueue=False)
    real_complete = OfflineResponder.complete
    runs = []

    def complete_while_redelivered(self, *, context, user_message):
        runs.append(len(runs))
        if len(runs) == 1:
            # The task redelivered meanwhile: a second run commits first.
            assert turn_run(turn_id=turn.pk, owner_id=owner.pk).status == Turn.Status.DONE
        return real_complete(self, context=context, user_message=user_message)

    monkeypatch.setattr(OfflineResponder, "complete", complete_while_redelivered)
    with caplog.at_level("INFO", logger="chat.turns.run"):
        done = turn_run(turn_id=turn.pk, owner_id=owner.pk)
    assert done.status == Turn.Status.DONE
    assert Message.objects.filter(owner=owner, role="assistant").count() == 1
    assert f"turn {turn.pk}: finished by another run; this reply is dropped" in caplog.messages


@pytest.mark.django_db(transaction=True)
def test_turn_fails_cleanly_when_its_own_message_is_deleted(owner, thread):
    turn = turn_create(thread=thread, content="I live in Oslo.", enqueue=False)
    preview = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[turn.user_message_id])
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    turn = turn_run(turn_id=turn.pk, owner_id=turn.owner_id)
    assert (turn.status, turn.reply, turn.error) == (
        Turn.Status.FAILED,
        None,
        "Your message was deleted before the reply was ready.",
    )


@pytest.mark.django_db(transaction=True)
def test_context_never_crosses_owners(owner, other_owner, thread):
    from tests.factories import make_thread

    chat(make_thread(other_owner), "My secret code is 4711.")
    turn = chat(thread, "What is my secret code?")
    assert turn.reply.content == "I don't have anything in memory about that yet."
    assert set(turn.reply.in_edges.values_list("source_id", flat=True)) == {turn.user_message_id}


def test_message_without_a_vector_has_no_neighbours(owner, thread):
    from chat.retrieval.context import context_retrieve
    from tests.factories import unit_vector

    make_message(thread, "I live in Paris.", embedding=unit_vector(1))
    blank = make_message(thread, "", embedding=None)
    assert context_retrieve(message=blank, policy="relevant", k=5, threshold=-1, window=5) == []
    assert [item.content for item in context_retrieve(message=blank, policy="full", k=5, threshold=-1, window=5)] == [
        "I live in Paris."
    ]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("none", []),
        ("window", ["I drink tea.", "I live in Paris."]),
        ("full", ["I have a cat.", "I drink tea.", "I live in Paris."]),
    ],
)
def test_context_policies_choose_what_the_model_sees(owner, thread, settings, policy, expected):
    from chat.retrieval.context import context_retrieve
    from tests.factories import unit_vector

    for seed, text in enumerate(["I have a cat.", "I drink tea.", "I live in Paris."]):
        make_message(thread, text, embedding=unit_vector(seed))
    make_message(thread, "deleted fact", embedding=unit_vector(9), status="deleted")
    question = make_message(thread, "Where do I live?", embedding=unit_vector(2))
    context = context_retrieve(message=question, policy=policy, k=5, threshold=0.2, window=2)
    assert [item.content for item in context] == expected


def test_relevant_policy_takes_top_k_above_threshold(owner, thread):
    from chat.retrieval.context import context_retrieve
    from tests.factories import unit_vector

    near = [make_message(thread, f"near {i}", embedding=unit_vector(1)) for i in range(7)]
    make_message(thread, "far", embedding=unit_vector(2))
    question = make_message(thread, "?", embedding=unit_vector(1))
    context = context_retrieve(message=question, policy="relevant", k=5, threshold=0.5, window=0)
    assert [item.id for item in context] == [m.pk for m in near[::-1][:5]]
    assert all(item.score == pytest.approx(1.0) for item in context)


class RecordingResponder:
    """Answers "ok" and records the system prompt of each call; `during` runs inside the call."""

    def __init__(self, during=None):
        self.systems: list[str] = []
        self.during = during

    def complete(self, *, context, user_message, system=""):
        self.systems.append(system)
        if self.during is not None:
            self.during()
        return "ok"


def test_a_system_prompt_is_one_stored_node_per_text_per_thread(owner, thread):
    first = turn_create(thread=thread, content="Hello there.", enqueue=False, system="Be brief.")
    second = turn_create(thread=thread, content="Hello again.", enqueue=False, system="Be brief.")
    other = turn_create(thread=make_thread(owner), content="Hi.", enqueue=False, system="Be brief.")
    changed = turn_create(thread=thread, content="And now?", enqueue=False, system="Be verbose.")
    plain = turn_create(thread=thread, content="No prompt.", enqueue=False)
    prompt = first.system_message
    assert (prompt.role, prompt.content, prompt.thread_id, prompt.embedding) == ("system", "Be brief.", thread.pk, None)
    # Stored just before the message it first served; reused while live, in its own thread only.
    assert prompt.seq == first.user_message.seq - 1
    assert second.system_message_id == prompt.pk
    assert other.system_message_id not in (None, prompt.pk)
    assert changed.system_message_id not in (None, prompt.pk)
    assert plain.system_message_id is None
    # A removed prompt is not reused: sent again, it is a new input.
    Message.objects.filter(pk=prompt.pk).update(status=Message.Status.DELETED)
    again = turn_create(thread=thread, content="Once more.", enqueue=False, system="Be brief.")
    assert again.system_message_id not in (None, prompt.pk)
    assert Message.objects.filter(owner=owner, role="system").count() == 4


def test_the_model_gets_the_stored_prompt_and_the_reply_an_edge_from_it(owner, thread, monkeypatch):
    responder = RecordingResponder()
    monkeypatch.setattr("chat.turns.run.get_responder", lambda: responder)
    turn = turn_create(thread=thread, content="Hello there.", enqueue=False, system="Be brief.")
    done = turn_run(turn_id=turn.pk, owner_id=turn.owner_id)
    assert done.status == Turn.Status.DONE
    assert responder.systems == ["Be brief."]
    edges = done.reply.in_edges.order_by("rank").values_list("source_id", "rank", "score", "signal")
    assert list(edges) == [(turn.user_message_id, 0, 1.0, ""), (turn.system_message_id, 1, 0.0, "system")]
    assert dep_ids(owner_id=owner.pk, roots=[turn.system_message_id]) == {turn.system_message_id, done.reply.pk}
    # A turn without a prompt calls the model exactly as before.
    bye = turn_create(thread=thread, content="Bye.", enqueue=False)
    turn_run(turn_id=bye.pk, owner_id=bye.owner_id)
    assert responder.systems == ["Be brief.", ""]


def test_a_turn_whose_system_prompt_was_removed_fails_without_a_reply(owner, thread, monkeypatch):
    responder = RecordingResponder()
    monkeypatch.setattr("chat.turns.run.get_responder", lambda: responder)
    turn = turn_create(thread=thread, content="Hello there.", enqueue=False, system="Be brief.")
    Message.objects.filter(pk=turn.system_message_id).update(status=Message.Status.PURGED, content="")
    failed = turn_run(turn_id=turn.pk, owner_id=turn.owner_id)
    assert (failed.status, failed.error) == (
        Turn.Status.FAILED,
        "The system prompt was deleted before the reply was ready.",
    )
    assert responder.systems == []
    assert not Message.objects.filter(owner=owner, role="assistant").exists()


def test_a_system_prompt_removed_during_generation_discards_the_reply(owner, thread, monkeypatch):
    turn = turn_create(thread=thread, content="Hello there.", enqueue=False, system="Be brief.")
    remove = lambda: Message.objects.filter(pk=turn.system_message_id).update(status=Message.Status.DELETED)  # noqa: E731
    responder = RecordingResponder(during=remove)
    monkeypatch.setattr("chat.turns.run.get_responder", lambda: responder)
    failed = turn_run(turn_id=turn.pk, owner_id=turn.owner_id)
    # Checked under the owner's lock at commit, like every context message: the reply is discarded,
    # and the rebuild finds the prompt gone.
    assert responder.systems == ["Be brief."]
    assert (failed.status, failed.error) == (
        Turn.Status.FAILED,
        "The system prompt was deleted before the reply was ready.",
    )
    assert not Message.objects.filter(owner=owner, role="assistant").exists()
    assert taint_violations(owner_id=owner.pk) == []
