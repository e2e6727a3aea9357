import random
import time

import pytest
from django.db import connection

from chat.models import ContextEdge, Message, Turn
from chat.turns.start import turn_create
from chat.turns.tasks import turn_run_task
from core.db.locks import _OWNER_LOCK_NAMESPACE
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.dependents import taint_violations
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def finished(turn_ids) -> bool:
    return not Turn.objects.filter(pk__in=turn_ids, status__in=["pending", "running"]).exists()


def test_worker_runs_a_turn_from_its_id(start_worker, owner, thread):
    start_worker()
    first = turn_create(thread=thread, content="I live in Lisbon.")
    wait_for(lambda: finished([first.pk]))
    second = turn_create(thread=thread, content="Where do I live?")
    wait_for(lambda: finished([second.pk]))
    second.refresh_from_db()
    assert second.status == "done"
    assert "I live in Lisbon." in second.reply.content
    sources = set(second.reply.in_edges.values_list("source_id", flat=True))
    # The message, or the fact drawn from it standing for it (DELLM_FACTS_CONTEXT=replace), whichever the facts
    # pass that follows the first turn had stored by the second.
    drawn = ContextEdge.objects.filter(source_id=first.user_message_id, signal="fact").values_list(
        "target_id", flat=True
    )
    assert first.user_message_id in sources or set(drawn) & sources


def test_deletions_racing_in_flight_turns_leave_no_taint(start_worker, owner, thread):
    """Many turns for one user while deletions of their context are confirmed."""
    start_worker(concurrency=2)
    rng = random.Random(7)
    facts = [f"My friend number {i} is called Name{i}." for i in range(12)]
    seeds = [turn_create(thread=thread, content=fact) for fact in facts]
    wait_for(lambda: finished([t.pk for t in seeds]), timeout=60)

    deadline = time.monotonic() + 60
    rounds = 0
    while rounds < 12 and time.monotonic() < deadline:
        rounds += 1
        turns = [
            turn_create(thread=thread, content=f"What is my friend number {rng.randrange(12)} called?")
            for _ in range(8)
        ]
        for _ in range(4):
            time.sleep(rng.uniform(0, 0.15))
            live = list(Message.objects.filter(owner=owner, status="active").values_list("pk", flat=True))
            target = rng.choice(live)
            preview = deletion_preview(owner=owner, actor=owner, ids=[target], mode="soft")
            deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
        wait_for(lambda turns=turns: finished([t.pk for t in turns]), timeout=60)
        assert taint_violations(owner_id=owner.pk) == []
    assert Turn.objects.filter(owner=owner, status="done").count() > len(seeds)


def test_worker_killed_mid_commit_leaves_no_partial_turn(start_worker, owner, thread):
    worker = start_worker(concurrency=1)
    turn = turn_create(thread=thread, content="I keep bees on my roof.", enqueue=False)
    with connection.cursor() as cursor:
        # Hold the owner's lock so the worker stops inside the reply's commit.
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [_OWNER_LOCK_NAMESPACE, owner.pk])
        turn_run_task.delay(turn_id=turn.pk, owner_id=turn.owner_id)
        wait_for(lambda: _waiting_on_owner_lock(), timeout=30)
        for child in worker.children():
            child.kill()
        time.sleep(0.5)
        assert Message.objects.filter(owner=owner, role="assistant").count() == 0
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_OWNER_LOCK_NAMESPACE, owner.pk])
    wait_for(lambda: finished([turn.pk]), timeout=60)
    turn.refresh_from_db()
    assert turn.status == "done"
    assert turn.attempts == 2
    assert Message.objects.filter(owner=owner, role="assistant").count() == 1


def _waiting_on_owner_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        return cursor.fetchone()[0] > 0
