from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from chat.models import ContextEdge, Message
from chat.writer.vectors import messages_index_embed
from core.errors import Conflict, NotFound, ValidationFailed
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.expiry import deletion_cancel, deletion_fire, deletions_due
from provenance.deletions.preview import deletion_preview
from provenance.deletions.undo import deletion_undo
from provenance.dependents import taint_violations
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message, make_thread, unit_vector


@pytest.fixture
def graph(thread):
    """m1 -> m2 -> m3, m1 -> m4, and an unrelated m5 -> m6, each embedded as the doors embed it (its index text)."""
    texts = ["I live in Paris", "Noted: Paris", "Paris is lovely", "Noted again", "I like tea", "Noted: tea"]
    m = {i: make_message(thread, texts[i - 1]) for i in range(1, 7)}
    messages_index_embed(owner_id=thread.owner_id, ids=[message.pk for message in m.values()])
    for source, target in [(1, 2), (2, 3), (1, 4), (5, 6)]:
        make_edge(m[source], m[target])
    return {i: Message.objects.get(pk=message.pk) for i, message in m.items()}


def snapshot(owner) -> dict:
    """Every message's full state and every edge: what I2 compares."""
    messages = {
        row["id"]: row
        for row in Message.objects.filter(owner=owner).values(
            "id", "status", "content", "embedding", "deleted_by_id", "expires_at"
        )
    }
    for row in messages.values():
        row["embedding"] = None if row["embedding"] is None else list(row["embedding"])
    edges = set(ContextEdge.objects.filter(owner=owner).values_list("source_id", "target_id", "rank", "score"))
    return {"messages": messages, "edges": edges}


def preview(owner, **kwargs) -> DeletionRequest:
    return deletion_preview(owner=owner, actor=owner, **{"mode": "soft", **kwargs})


def confirm(owner, deletion) -> DeletionRequest:
    return deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)


def ids(m, *keys) -> list[int]:
    return sorted(m[k].pk for k in keys)


def test_preview_changes_nothing_and_explains(owner, graph):
    before = snapshot(owner)
    deletion = preview(owner, ids=[graph[1].pk])
    assert snapshot(owner) == before
    assert (deletion.status, deletion.matched_ids, deletion.dependent_ids) == (
        "previewed",
        [graph[1].pk],
        ids(graph, 2, 3, 4),
    )
    assert deletion.explanations == {
        str(graph[2].pk): [graph[1].pk, graph[2].pk],
        str(graph[3].pk): [graph[1].pk, graph[2].pk, graph[3].pk],
        str(graph[4].pk): [graph[1].pk, graph[4].pk],
    }


def test_soft_delete_removes_exactly_dep_and_undo_restores_it(owner, graph):
    before = snapshot(owner)
    deletion = confirm(owner, preview(owner, ids=[graph[1].pk]))
    assert deletion.status == "executed"
    assert deletion.deleted_ids == ids(graph, 1, 2, 3, 4)
    statuses = dict(Message.objects.filter(owner=owner).values_list("id", "status"))
    assert [statuses[graph[i].pk] for i in range(1, 7)] == ["deleted"] * 4 + ["active"] * 2
    assert taint_violations(owner_id=owner.pk) == []

    undone = deletion_undo(deletion_id=deletion.pk, owner_id=owner.pk)
    assert undone.status == "undone"
    assert snapshot(owner) == before


def test_purge_destroys_content_and_keeps_tombstones(owner, graph):
    deletion = confirm(owner, preview(owner, ids=[graph[2].pk], mode="purge"))
    assert deletion.deleted_ids == ids(graph, 2, 3)
    for message in Message.objects.filter(pk__in=deletion.deleted_ids):
        assert (message.status, message.content, message.embedding, message.role) == (
            "purged",
            "",
            None,
            "user",
        )
    assert Message.objects.get(pk=graph[1].pk).content == "I live in Paris"
    with pytest.raises(Conflict):
        deletion_undo(deletion_id=deletion.pk, owner_id=owner.pk)


def test_exact_selection_is_case_insensitive_substring(owner, graph):
    deletion = preview(owner, exact="PARIS")
    assert deletion.matched_ids == ids(graph, 1, 2, 3)
    assert deletion.dependent_ids == ids(graph, 4)
    assert deletion.resolved_selector == "exact"


def test_semantic_selection_uses_threshold(owner, thread, monkeypatch):
    model = settings.DELLM_EMBEDDING_MODEL
    close = make_message(thread, "near", embedding=unit_vector(1), embedding_model=model)
    make_message(thread, "far", embedding=unit_vector(2), embedding_model=model)
    # Another model's vector (mid-switch, another dimension) is never compared.
    make_message(thread, "near, old model", embedding=unit_vector(1, 768), embedding_model="old-768d")
    monkeypatch.setattr("provenance.deletions.preview.embed_one", lambda text: unit_vector(1))
    assert preview(owner, semantic="anything", threshold=0.99).matched_ids == [close.pk]
    assert len(preview(owner, semantic="anything", threshold=-1).matched_ids) == 2


def test_depth_limited_deletion_is_recorded_and_tolerated_by_the_check(owner, graph):
    deletion = confirm(owner, preview(owner, ids=[graph[1].pk], depth=1))
    assert deletion.deleted_ids == ids(graph, 1, 2, 4)
    assert "taint depth limited to 1" in deletion.outcome
    assert Message.objects.get(pk=graph[3].pk).status == "active"
    assert taint_violations(owner_id=owner.pk) == []


def test_confirm_recomputes_dep_with_replies_made_after_the_preview(owner, thread, graph):
    deletion = preview(owner, ids=[graph[1].pk])
    late = make_message(thread, "a later reply", role="assistant")
    make_edge(graph[4], late)
    done = confirm(owner, deletion)
    assert late.pk in done.deleted_ids
    assert late.pk in done.dependent_ids


def test_confirm_twice_is_harmless(owner, graph):
    first = confirm(owner, preview(owner, ids=[graph[5].pk]))
    second = deletion_confirm(deletion_id=first.pk, owner_id=owner.pk, confirmed_by=owner)
    assert (second.status, second.deleted_ids) == (first.status, first.deleted_ids)


def test_empty_selection_confirms_as_a_noop(owner, graph):
    before = snapshot(owner)
    deletion = confirm(owner, preview(owner, exact="no such words"))
    assert (deletion.total, deletion.deleted_ids, deletion.status) == (0, [], "executed")
    assert snapshot(owner) == before


def test_cancel_preview_then_confirm_is_refused(owner, graph):
    deletion = deletion_cancel(deletion_id=preview(owner, ids=[graph[1].pk]).pk, owner_id=owner.pk)
    assert deletion.status == "cancelled"
    with pytest.raises(Conflict):
        confirm(owner, deletion)


def test_expire_marks_matched_then_fires_with_recomputed_dep(owner, thread, graph):
    when = timezone.now() + timedelta(hours=1)
    deletion = confirm(owner, preview(owner, ids=[graph[1].pk], mode="expire", expire_at=when))
    assert deletion.status == "scheduled"
    assert Message.objects.get(pk=graph[1].pk).status == "expiring"
    late = make_message(thread, "derived meanwhile", role="assistant")
    make_edge(graph[1], late)

    assert deletions_due() == []
    assert deletion_fire(deletion_id=deletion.pk).status == "scheduled"
    fired = deletion_fire(deletion_id=deletion.pk, now=when + timedelta(seconds=1))
    assert fired.status == "executed"
    assert fired.deleted_ids == sorted([*ids(graph, 1, 2, 3, 4), late.pk])
    assert set(Message.objects.filter(pk__in=fired.deleted_ids).values_list("status", flat=True)) == {"purged"}


def test_cancel_scheduled_expiry_restores_status(owner, graph):
    when = timezone.now() + timedelta(hours=1)
    deletion = confirm(owner, preview(owner, ids=[graph[1].pk], mode="expire", expire_at=when))
    deletion_cancel(deletion_id=deletion.pk, owner_id=owner.pk)
    message = Message.objects.get(pk=graph[1].pk)
    assert (message.status, message.expires_at, message.deleted_by_id) == ("active", None, None)


def marks(message) -> tuple:
    message.refresh_from_db()
    return message.status, message.expires_at, message.deleted_by_id


def test_a_message_two_expiries_matched_shows_the_first_until_both_are_gone(owner, graph):
    soon, later = timezone.now() + timedelta(hours=1), timezone.now() + timedelta(days=1)
    first = confirm(owner, preview(owner, ids=[graph[1].pk], mode="expire", expire_at=soon))
    second = confirm(owner, preview(owner, ids=[graph[1].pk], mode="expire", expire_at=later))
    # Scheduling the later one does not hide the sooner.
    assert marks(graph[1]) == ("expiring", soon, first.pk)
    deletion_cancel(deletion_id=first.pk, owner_id=owner.pk)
    assert marks(graph[1]) == ("expiring", later, second.pk)
    deletion_cancel(deletion_id=second.pk, owner_id=owner.pk)
    assert marks(graph[1]) == ("active", None, None)


def test_undoing_a_soft_deletion_of_an_expiring_message_keeps_it_expiring(owner, graph):
    when = timezone.now() + timedelta(hours=1)
    expiry = confirm(owner, preview(owner, ids=[graph[1].pk], mode="expire", expire_at=when))
    soft = confirm(owner, preview(owner, ids=[graph[1].pk]))
    assert marks(graph[1])[0] == "deleted"
    deletion_undo(deletion_id=soft.pk, owner_id=owner.pk)
    assert marks(graph[1]) == ("expiring", when, expiry.pk)
    assert [i for i in range(2, 7) if marks(graph[i])[0] != "active"] == []


def test_undo_is_refused_when_a_later_purge_took_some_messages(owner, graph):
    soft = confirm(owner, preview(owner, ids=[graph[2].pk]))
    confirm(owner, preview(owner, ids=[graph[3].pk], mode="purge"))
    before = snapshot(owner)
    with pytest.raises(Conflict):
        deletion_undo(deletion_id=soft.pk, owner_id=owner.pk)
    assert snapshot(owner) == before


def test_undo_is_refused_while_an_ancestor_is_removed_by_another_deletion(owner, graph):
    inner = confirm(owner, preview(owner, ids=[graph[2].pk]))
    outer = confirm(owner, preview(owner, ids=[graph[1].pk]))
    assert outer.deleted_ids == ids(graph, 1, 4)
    before = snapshot(owner)
    with pytest.raises(Conflict, match="undo that one first"):
        deletion_undo(deletion_id=inner.pk, owner_id=owner.pk)
    assert snapshot(owner) == before
    deletion_undo(deletion_id=outer.pk, owner_id=owner.pk)
    deletion_undo(deletion_id=inner.pk, owner_id=owner.pk)
    assert taint_violations(owner_id=owner.pk) == []


def test_audit_row_never_holds_text(owner, graph):
    deletion = confirm(owner, preview(owner, exact="I live in Paris", mode="purge"))
    row = DeletionRequest.objects.filter(pk=deletion.pk).values().get()
    assert "Paris" not in repr(row)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"exact": ""}, ValidationFailed),
        ({"exact": "   "}, ValidationFailed),
        ({"semantic": ""}, ValidationFailed),
        ({"ids": []}, ValidationFailed),
        ({"ids": ["1"]}, ValidationFailed),
        ({"ids": [True]}, ValidationFailed),
        ({"ids": [10**12]}, NotFound),
        ({"ids": [1], "exact": "x"}, ValidationFailed),
        ({}, ValidationFailed),
        ({"exact": "Paris", "depth": -1}, ValidationFailed),
        ({"exact": "Paris", "depth": 1.5}, ValidationFailed),
        ({"semantic": "Paris", "threshold": 1.5}, ValidationFailed),
        ({"semantic": "Paris", "threshold": -1.01}, ValidationFailed),
        ({"semantic": "Paris", "threshold": float("nan")}, ValidationFailed),
        ({"exact": "Paris", "threshold": 0.5}, ValidationFailed),
        ({"exact": "Paris", "mode": "shred"}, ValidationFailed),
        ({"exact": "Paris", "mode": "expire"}, ValidationFailed),
        ({"exact": "Paris", "mode": "expire", "expire_at": "tomorrow"}, ValidationFailed),
        ({"exact": "Paris", "mode": "soft", "expire_at": timezone.now() + timedelta(days=1)}, ValidationFailed),
    ],
)
def test_bad_input_raises_domain_error_and_changes_nothing(owner, graph, kwargs, error):
    before = snapshot(owner)
    with pytest.raises(error):
        preview(owner, **kwargs)
    assert snapshot(owner) == before
    assert not DeletionRequest.objects.exists()


def test_expire_at_in_the_past_is_refused(owner, graph):
    with pytest.raises(ValidationFailed, match="future"):
        preview(owner, ids=[graph[1].pk], mode="expire", expire_at=timezone.now() - timedelta(seconds=1))


def test_other_owners_ids_are_not_found_and_nothing_changes(owner, other_owner, graph):
    theirs = make_message(make_thread(other_owner), "their secret")
    before = snapshot(owner)
    with pytest.raises(NotFound):
        preview(owner, ids=[graph[1].pk, theirs.pk])
    deletion = preview(owner, ids=[graph[1].pk])
    with pytest.raises(NotFound):
        deletion_confirm(deletion_id=deletion.pk, owner_id=other_owner.pk, confirmed_by=other_owner)
    with pytest.raises(NotFound):
        deletion_undo(deletion_id=deletion.pk, owner_id=other_owner.pk)
    assert snapshot(owner) == before
    assert Message.objects.get(pk=theirs.pk).status == "active"


def test_dellm_check_names_offenders(owner, graph, capsys):
    call_command("dellm_check")
    Message.objects.filter(pk=graph[1].pk).update(status="deleted")
    with pytest.raises(CommandError, match="I1 violated by 2 messages"):
        call_command("dellm_check")
    assert f"message {graph[2].pk} is live but was generated from {graph[1].pk}" in capsys.readouterr().err


def test_dellm_check_names_edges_that_cross_owners(owner, other_owner, graph, capsys):
    call_command("dellm_check")
    foreign = make_message(make_thread(other_owner))
    with connection.cursor() as cursor:
        # Pending deferred checks would forbid the ALTER TABLE below.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    # The database refuses such an edge: its foreign keys are (owner_id, source_id) and (owner_id, target_id).
    with pytest.raises(IntegrityError), transaction.atomic():
        ContextEdge.objects.create(owner=owner, source=graph[1], target=foreign, rank=1, score=0.5)
    with connection.cursor() as cursor:
        for column in ("source_id", "target_id"):
            cursor.execute(f"ALTER TABLE chat_contextedge DROP CONSTRAINT chat_contextedge_{column}_owner_fk")
    # Without them (a schema older than chat 0015), the check still finds what they now refuse.
    into = ContextEdge.objects.create(owner=owner, source=graph[1], target=foreign, rank=1, score=0.5)
    out_of = ContextEdge.objects.create(owner=owner, source=foreign, target=graph[6], rank=1, score=0.5)
    with pytest.raises(CommandError, match="edges crossing owners: 2"):
        call_command("dellm_check")
    err = capsys.readouterr().err
    assert f"edge {into.pk}: {graph[1].pk} -> {foreign.pk} joins messages of different owners" in err
    assert f"edge {out_of.pk}: {foreign.pk} -> {graph[6].pk} joins messages of different owners" in err


def test_a_system_prompt_is_selected_by_its_exact_words_or_id_never_by_meaning(owner, thread):
    from chat.turns.run import turn_run
    from chat.turns.start import turn_create
    from provenance.deletions.forget_phrases import resolve_deletion_request

    text = "Dana's locker code is Kestrel-4471."
    turn = turn_create(thread=thread, content="Hello.", enqueue=False, system=text)
    reply = turn_run(turn_id=turn.pk, owner_id=turn.owner_id).reply
    prompt = turn.system_message_id
    # Never embedded, so a selection by meaning cannot reach it (its blast radius is every reply of
    # its thread, and the client sends it again anyway); typed as a request, the same.
    by_meaning = deletion_preview(owner=owner, actor=owner, mode="purge", semantic=text, threshold=0.0)
    assert prompt not in by_meaning.matched_ids
    request = resolve_deletion_request(owner=owner, text="Forget that Dana's locker code is Kestrel-4471")
    assert prompt not in deletion_preview(owner=owner, actor=owner, mode="purge", **request).matched_ids
    # Its exact words are that text, wherever it is: it goes, with the reply it shaped.
    exact = deletion_preview(owner=owner, actor=owner, mode="purge", exact="Kestrel-4471")
    assert (exact.matched_ids, exact.dependent_ids) == ([prompt], [reply.pk])
    by_id = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[prompt])
    assert (by_id.matched_ids, by_id.dependent_ids) == ([prompt], [reply.pk])
