"""Regenerate what was derived: the paper's worked example, redaction, cancel, undo (tasks run eagerly)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from chat.index.embeddings import embed_one
from chat.models import ContextEdge, Message, Turn
from chat.selectors import thread_message_list
from chat.turns.run import turn_run
from chat.turns.start import turn_create
from core.errors import Conflict, ValidationFailed
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.expiry import deletion_cancel, deletion_fire
from provenance.deletions.preview import deletion_preview
from provenance.deletions.undo import deletion_resume, deletion_undo
from provenance.dependents import taint_violations
from provenance.regeneration.replies import regeneration_progress, regenerations_stalled_sweep, undo_plan
from tests.factories import make_edge, make_message

LIVE = ("active", "expiring")


def chat(thread, text: str) -> Turn:
    turn = turn_create(thread=thread, content=text, enqueue=False)
    return turn_run(turn_id=turn.pk, owner_id=turn.owner_id)


def preview(owner, **kwargs):
    return deletion_preview(owner=owner, actor=owner, **{"mode": "soft", **kwargs})


def confirm(owner, deletion, **kwargs):
    return deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner, **kwargs)


def status(message) -> str:
    return Message.objects.values_list("status", flat=True).get(pk=message.pk)


def live_sources_only(reply_ids) -> bool:
    sources = ContextEdge.objects.filter(target_id__in=reply_ids).values_list("source__status", flat=True)
    return all(s in LIVE for s in sources)


@pytest.fixture
def paper_history(thread):
    """The paper's worked example with text: m_{2i} answers m_{2i-1};
    context(m2)={m1}, context(m4)={m3,m1}, context(m6)={m5}, context(m8)={m7,m1}."""
    texts = [
        "I live in Paris.",
        "Noted: I live in Paris.",
        "I work as a nurse.",
        "Noted: I work as a nurse.",
        "I like green tea.",
        "Noted: I like green tea.",
        "Where do I live and what is my job?",
        "From what you told me: I live in Paris. I work as a nurse.",
    ]
    m = {
        i: make_message(thread, text, role="user" if i % 2 else "assistant", embedding=embed_one(text))
        for i, text in enumerate(texts, 1)
    }
    for source, target, rank in [(1, 2, 0), (3, 4, 0), (1, 4, 1), (5, 6, 0), (7, 8, 0), (1, 8, 1)]:
        make_edge(m[source], m[target], rank=rank)
    return m


@pytest.mark.django_db(transaction=True)
def test_paper_example_regenerates_replies_whose_question_survives(owner, thread, paper_history):
    m = paper_history
    deletion = preview(owner, ids=[m[1].pk], derived="regenerate")
    assert (deletion.derived, deletion.dependent_ids, deletion.regenerate_ids) == (
        "regenerate",
        [m[2].pk, m[4].pk, m[8].pk],
        [m[4].pk, m[8].pk],
    )

    done = confirm(owner, deletion)

    # m2 answered m1 (removed): removed, not rewritten. m4, m8: rewritten, in that order.
    assert done.deleted_ids == [m[1].pk, m[2].pk, m[4].pk, m[8].pk]
    assert [status(m[i]) for i in range(1, 9)] == ["deleted"] * 2 + ["active", "deleted"] + ["active"] * 3 + ["deleted"]
    turns = list(Turn.objects.filter(deletion_id=done.pk).order_by("pk"))
    assert [(t.replaces, t.user_message_id, t.status) for t in turns] == [
        (m[4].pk, m[3].pk, "done"),
        (m[8].pk, m[7].pk, "done"),
    ]
    new4, new8 = (t.reply for t in turns)
    assert new4.seq < new8.seq
    assert (new4.replaces, new4.place, new8.replaces, new8.place) == (m[4].pk, m[4].seq, m[8].pk, m[8].seq)
    assert "Paris" not in new4.content + new8.content
    assert new8.content == "From what you told me: “I work as a nurse.”"
    # New edges never come from a removed message; the thread shows each rewrite where its original was.
    assert live_sources_only([new4.pk, new8.pk])
    assert not ContextEdge.objects.filter(target__in=[new4, new8], source_id__in=done.deleted_ids).exists()
    assert [x.pk for x in reversed(thread_message_list(thread=thread))] == [
        m[3].pk,
        new4.pk,
        m[5].pk,
        m[6].pk,
        m[7].pk,
        new8.pk,
    ]
    assert taint_violations(owner_id=owner.pk) == []

    assert done.receipt["passed"] is True
    assert done.receipt["checks"]["regeneration"] == {
        "passed": True,
        "total": 2,
        "rewritten": [new4.pk, new8.pk],
        "failed": [],
        "pending": [],
        "taint_violations": [],
        "context_violations": [],
    }
    assert done.regeneration_finished_at is not None


@pytest.mark.django_db(transaction=True)
def test_delete_is_still_the_default_and_rewrites_nothing(owner, paper_history):
    m = paper_history
    deletion = preview(owner, ids=[m[1].pk])
    assert (deletion.derived, deletion.regenerate_ids) == ("delete", [m[4].pk, m[8].pk])
    done = confirm(owner, deletion)
    assert (done.regenerate_ids, Turn.objects.filter(deletion_id=done.pk).count()) == ([], 0)
    assert "regeneration" not in done.receipt["checks"]


@pytest.mark.django_db(transaction=True)
def test_undo_restores_originals_and_removes_rewrites_with_their_dep(owner, thread, paper_history):
    m = paper_history
    done = confirm(owner, preview(owner, ids=[m[1].pk], derived="regenerate"))
    new4, new8 = (t.reply for t in Turn.objects.filter(deletion_id=done.pk).order_by("pk"))
    later = chat(thread, "Do I work as a nurse?")  # may draw on the rewrites
    plan = undo_plan(deletion=done)
    assert plan.restores == [m[1].pk, m[2].pk, m[4].pk, m[8].pk]
    derived_from_rewrites = set(
        ContextEdge.objects.filter(source__in=[new4, new8], target=later.reply).values_list("target_id", flat=True)
    )
    assert plan.removes == sorted({new4.pk, new8.pk} | derived_from_rewrites)

    undone = deletion_undo(deletion_id=done.pk, owner_id=owner.pk)

    assert undone.undo_removed_ids == plan.removes
    assert [status(m[i]) for i in range(1, 9)] == ["active"] * 8
    assert [status(x) for x in (new4, new8)] == ["deleted", "deleted"]
    assert taint_violations(owner_id=owner.pk) == []


@pytest.mark.django_db(transaction=True)
def test_nurse_example_redacts_and_rewrites_the_replies_in_place(owner, thread):
    told = chat(thread, "I live in Paris and work as a nurse.")
    asked = chat(thread, "Where do I work and live?")
    assert asked.reply.content == "From what you told me: “I live in Paris and work as a nurse.”"

    deletion = preview(owner, exact="live in Paris")
    assert deletion.matched_ids == [told.user_message_id, told.reply_id, asked.reply_id]
    assert list(deletion.redaction_proposals) == [
        {"message": told.user_message_id, "text": "I work as a nurse.", "regenerate": [told.reply_id, asked.reply_id]}
    ]
    done = confirm(owner, deletion, redactions={str(told.user_message_id): "I work as a nurse."})

    new_user = Message.objects.get(pk=done.redacted[str(told.user_message_id)])
    assert (new_user.content, new_user.role, new_user.replaces, new_user.place) == (
        "I work as a nurse.",
        "user",
        told.user_message_id,
        1,
    )
    assert new_user.embedding is not None
    shown = [(x.role, x.content) for x in reversed(thread_message_list(thread=thread))]
    assert shown == [
        ("user", "I work as a nurse."),
        ("assistant", "Noted — work and job: you work as a nurse."),
        ("user", "Where do I work and live?"),
        ("assistant", "From what you told me: “I work as a nurse.”"),
    ]
    assert done.derived == "regenerate"
    assert done.receipt["passed"] is True
    assert done.receipt["checks"]["forget"]["passed"] is True
    assert taint_violations(owner_id=owner.pk) == []


@pytest.mark.django_db(transaction=True)
def test_purge_with_redaction_leaves_no_original_text(owner, thread):
    told = chat(thread, "I live in Paris and work as a nurse.")
    deletion = preview(owner, mode="purge", exact="Paris")
    done = confirm(owner, deletion, redactions={str(told.user_message_id): "I work as a nurse."})
    assert not Message.objects.filter(owner=owner, content__icontains="Paris").exists()
    assert Message.objects.get(pk=told.user_message_id).content == ""
    assert done.receipt["passed"] is True


@pytest.mark.django_db(transaction=True)
def test_redactions_are_validated_and_change_nothing(owner, thread, paper_history):
    m = paper_history
    deletion = preview(owner, exact="Paris")
    for redactions, field in [
        ({str(m[3].pk): "x"}, "not matched"),
        ({"abc": "x"}, "invalid id"),
        ({str(m[1].pk): "  "}, "invalid text"),
        ({str(m[2].pk): "x"}, "not a user message"),
    ]:
        with pytest.raises(ValidationFailed) as error:
            confirm(owner, deletion, redactions=redactions)
        assert error.value.fields == {"redactions": field}
    assert [status(m[i]) for i in range(1, 9)] == ["active"] * 8
    with pytest.raises(ValidationFailed):
        preview(owner, ids=[m[1].pk], derived="rewrite")


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_regeneration_and_resume_finishes_it(owner, paper_history, monkeypatch):
    m = paper_history
    from provenance.regeneration.tasks import regeneration_run_task

    monkeypatch.setattr(regeneration_run_task, "delay", lambda **kwargs: None)  # started by hand below
    done = confirm(owner, preview(owner, ids=[m[1].pk], derived="regenerate"))
    assert [t.status for t in Turn.objects.filter(deletion_id=done.pk)] == ["pending", "pending"]

    cancelled = deletion_cancel(deletion_id=done.pk, owner_id=owner.pk)
    assert cancelled.status == "executed"
    assert [t.status for t in Turn.objects.filter(deletion_id=done.pk)] == ["failed", "failed"]
    done.refresh_from_db()
    assert done.receipt["checks"]["regeneration"]["failed"] == [m[4].pk, m[8].pk]
    assert done.regeneration_finished_at is not None
    regeneration_run_task.run(deletion_id=done.pk, owner_id=done.owner_id)  # a late task finds nothing to do
    assert [t.status for t in Turn.objects.filter(deletion_id=done.pk)] == ["failed", "failed"]
    again = deletion_cancel(deletion_id=done.pk, owner_id=owner.pk)  # harmless twice
    assert again.regeneration_cancelled_at == done.regeneration_cancelled_at
    plain = confirm(owner, preview(owner, ids=[m[5].pk]))
    with pytest.raises(Conflict):
        deletion_cancel(deletion_id=plain.pk, owner_id=owner.pk)

    monkeypatch.undo()
    deletion_resume(deletion_id=done.pk, owner_id=owner.pk)
    done.refresh_from_db()
    assert [t.status for t in Turn.objects.filter(deletion_id=done.pk).order_by("pk")] == ["done", "done"]
    assert done.receipt["checks"]["regeneration"]["rewritten"] == list(
        Turn.objects.filter(deletion_id=done.pk).order_by("pk").values_list("reply_id", flat=True)
    )
    assert taint_violations(owner_id=owner.pk) == []


@pytest.mark.django_db(transaction=True)
def test_an_expiry_that_regenerates_rewrites_when_it_fires(owner, paper_history):
    from datetime import timedelta

    from django.utils import timezone

    m = paper_history
    scheduled = confirm(
        owner,
        preview(
            owner, ids=[m[1].pk], mode="expire", expire_at=timezone.now() + timedelta(hours=1), derived="regenerate"
        ),
    )
    assert (scheduled.status, Turn.objects.filter(deletion_id=scheduled.pk).count()) == ("scheduled", 0)
    fired = deletion_fire(deletion_id=scheduled.pk, now=scheduled.expire_at + timedelta(seconds=1))
    fired.refresh_from_db()
    assert [t.replaces for t in Turn.objects.filter(deletion_id=fired.pk, status="done").order_by("pk")] == [
        m[4].pk,
        m[8].pk,
    ]
    assert fired.receipt["checks"]["regeneration"]["passed"] is True
    assert taint_violations(owner_id=owner.pk) == []


def test_a_regenerated_reply_keeps_the_live_system_prompt_it_was_written_under(owner, thread):
    chat(thread, "I live in Paris.")
    fact = Message.objects.get(content="I live in Paris.")
    turn = turn_create(thread=thread, content="Where do I live?", enqueue=False, system="Be brief.")
    turn = turn_run(turn_id=turn.pk, owner_id=turn.owner_id)
    assert turn.reply.in_edges.filter(source=fact).exists()
    prompt = turn.system_message

    deletion = confirm(owner, preview(owner, ids=[fact.pk]), derived="regenerate")

    [rewrite] = Turn.objects.filter(deletion_id=deletion.pk)
    assert rewrite.system_message_id == prompt.pk
    rewritten = Message.objects.get(replaces=turn.reply_id)
    assert rewritten.in_edges.filter(source=prompt, signal=ContextEdge.Signal.SYSTEM).exists()


def test_a_regeneration_drops_a_system_prompt_the_deletion_removed(owner, thread):
    turn = turn_create(thread=thread, content="Where do I live?", enqueue=False, system="Be brief.")
    turn = turn_run(turn_id=turn.pk, owner_id=turn.owner_id)

    deletion = confirm(owner, preview(owner, ids=[turn.system_message_id]), derived="regenerate")

    assert [t.system_message_id for t in Turn.objects.filter(deletion_id=deletion.pk)] == [None]


@pytest.mark.django_db(transaction=True)
def test_regenerating_a_question_whose_reply_is_still_in_flight_has_nothing_to_wait_for(owner, thread):
    asked = turn_create(thread=thread, content="Who is my friend number 7?", enqueue=False)
    done = confirm(owner, preview(owner, ids=[asked.user_message_id], derived="regenerate"))
    assert (done.regenerate_ids, done.regeneration_finished_at, regeneration_progress(deletion=done)) == (
        [],
        None,
        None,
    )
    assert (done.receipt["passed"], "regeneration" in done.receipt["checks"]) == (True, False)
    assert (
        turn_run(turn_id=asked.pk, owner_id=asked.owner_id).error
        == "Your message was deleted before the reply was ready."
    )


@pytest.mark.django_db(transaction=True)
def test_sweep_runs_a_regeneration_whose_task_was_lost(owner, paper_history, monkeypatch, settings):
    settings.DELLM_TURN_MAX_ATTEMPTS = 3
    m = paper_history
    from provenance.regeneration.tasks import regeneration_run_task, regenerations_sweep_task

    monkeypatch.setattr(regeneration_run_task, "delay", lambda **kwargs: None)  # the task is lost
    done = confirm(owner, preview(owner, ids=[m[1].pk], derived="regenerate"))
    monkeypatch.undo()
    assert regenerations_stalled_sweep() == {"resumed": [], "failed": []}  # not stale yet
    hopeless, lost = Turn.objects.filter(deletion_id=done.pk).order_by("replaces")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Turn.objects.filter(pk=hopeless.pk).update(status="running", attempts=3, updated_at=an_hour_ago)
    Turn.objects.filter(pk=lost.pk).update(updated_at=an_hour_ago)

    regenerations_sweep_task.delay()  # what beat runs; tasks run eagerly here

    hopeless.refresh_from_db()
    lost.refresh_from_db()
    done.refresh_from_db()
    assert (hopeless.replaces, hopeless.status, hopeless.error) == (
        m[4].pk,
        "failed",
        "The reply could not be rewritten after 3 attempts; resume to retry.",
    )
    assert (lost.replaces, lost.status, lost.attempts) == (m[8].pk, "done", 1)
    assert done.regeneration_finished_at is not None
    check = done.receipt["checks"]["regeneration"]
    assert (check["passed"], check["rewritten"], check["failed"], check["pending"]) == (
        True,
        [lost.reply_id],
        [m[4].pk],
        [],
    )
    assert regenerations_stalled_sweep(now=timezone.now() + timedelta(hours=1)) == {"resumed": [], "failed": []}


@pytest.mark.parametrize("mode", ["soft", "purge"])
def test_tool_steps_are_deleted_not_regenerated_and_other_replies_still_are(owner, thread, mode):
    from chat.writer import Source, Supplied, message_store, tool_results_store

    def store(role, text, sources=(), **extra):
        return message_store(owner_id=owner.pk, thread_id=thread.pk, role=role, content=text, sources=sources, **extra)

    fact = store("user", "I live in Lyon.", embedding=embed_one("I live in Lyon."))
    question = store("user", "Weather where I live?")
    call = store(
        "assistant",
        "",
        [Source(id=question.pk), Source(id=fact.pk, rank=1)],
        tool_calls=[{"id": "c1", "name": "get_weather", "arguments": '{"city": "Lyon"}'}],
    )
    Turn.objects.create(owner=owner, user_message=question, reply=call, status="done")
    (result,) = tool_results_store(
        owner_id=owner.pk, call_id=call.pk, results=[Supplied(role="tool", content="Sunny", tool_call_id="c1")]
    )
    answer = store("assistant", "Sunny in Lyon.", [Source(id=question.pk), Source(id=result.pk, rank=2, signal="tool")])
    Turn.objects.create(owner=owner, user_message=question, reply=answer, tool_call=call, status="done")
    other = store("user", "Where do I live?")
    plain = store("assistant", "In Lyon.", [Source(id=other.pk), Source(id=fact.pk, rank=1)])
    Turn.objects.create(owner=owner, user_message=other, reply=plain, status="done")

    deletion = preview(owner, ids=[fact.pk], derived="regenerate", mode=mode)
    assert deletion.regenerate_ids == [plain.pk]
    done = confirm(owner, deletion)
    # Decided again at confirm, after the purge emptied the calls: still only the ordinary reply.
    assert done.regenerate_ids == [plain.pk]
    assert list(Turn.objects.filter(deletion_id=done.pk).values_list("replaces", flat=True)) == [plain.pk]
    assert [status(m) for m in (call, result, answer)] == [status(fact)] * 3
