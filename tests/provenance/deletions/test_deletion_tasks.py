import base64
import itertools
import json
import time
import uuid
from datetime import timedelta

import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from chat.models import Message, Turn
from chat.partitions import partition_of
from chat.turns.start import turn_create
from dellm_site.celery import app as celery_app
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.dependents import taint_violations
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message
from tests.helpers import redis_dump, wait_for
from tests.helpers import test_database_url as database_url  # a test_ name would be collected as a test

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SECRET = "the vault combination is 31-41-59"


def converse(thread, texts):
    for text in texts:
        turn = turn_create(thread=thread, content=text)
        wait_for(lambda turn=turn: Turn.objects.filter(pk=turn.pk, status="done").exists())


def test_task_payloads_carry_ids_only(owner, thread):
    queue = f"dellm-test-idle-{uuid.uuid4().hex[:8]}"
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = queue
    try:
        turn = turn_create(thread=thread, content=SECRET)
    finally:
        celery_app.conf.task_default_queue = previous
    client = redis.Redis.from_url(settings.REDIS_URL)
    # Celery's keys carry the instance prefix (core/redis_ns.py).
    key = f"{settings.DELLM_REDIS_PREFIX}:{queue}"
    [raw] = client.lrange(key, 0, -1)
    client.delete(key)
    envelope = json.loads(raw)
    args, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
    assert (args, kwargs, envelope["headers"]["task"]) == (
        [],
        {"turn_id": turn.pk, "owner_id": owner.pk},
        "chat.turn_run",
    )
    assert "vault" not in raw.decode()


def test_purge_leaves_no_residue_in_redis_and_vacuums(start_worker, owner, thread):
    start_worker()
    converse(thread, [SECRET, "What is the vault combination?", "Remind me of the vault combination"])
    assert Message.objects.filter(owner=owner, content__contains="31-41-59").count() >= 3
    vacuums_before = _vacuum_count(owner.pk)

    preview = deletion_preview(owner=owner, actor=owner, exact="31-41-59", mode="purge")
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    wait_for(lambda: _vacuum_count(owner.pk) > vacuums_before, timeout=30)
    assert "31-41-59" not in redis_dump()
    assert "vault combination is" not in redis_dump()


def test_expiry_fires_and_takes_replies_derived_after_scheduling(start_worker, owner, thread):
    start_worker()
    fact = make_message(thread, "My passport number is X123.")
    early = make_message(thread, "Noted.", role="assistant")
    make_edge(fact, early)
    when = timezone.now() + timedelta(seconds=3)
    preview = deletion_preview(owner=owner, actor=owner, ids=[fact.pk], mode="expire", expire_at=when)
    scheduled = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    assert scheduled.status == "scheduled"
    late = make_message(thread, "Your passport number is X123.", role="assistant")
    make_edge(fact, late)

    deletion = wait_for(lambda: DeletionRequest.objects.filter(pk=scheduled.pk, status="executed").first(), timeout=30)
    assert timezone.now() >= when
    assert deletion.deleted_ids == sorted([fact.pk, early.pk, late.pk])
    assert set(Message.objects.filter(pk__in=deletion.deleted_ids).values_list("status", "content")) == {("purged", "")}


def test_worker_killed_mid_deletion_applies_it_whole_or_not_at_all(start_worker, owner, thread):
    worker = start_worker(concurrency=1)
    messages = [make_message(thread, f"fact {i}") for i in range(6)]
    for source, target in itertools.pairwise(messages):
        make_edge(source, target)

    with psycopg.connect(database_url()) as blocker:
        # Another session locks the last message of Dep before the expiry can fire, so the
        # worker's purge blocks half-way however late this test process gets the CPU.
        blocker.execute(f"SELECT 1 FROM {Message._meta.db_table} WHERE id = %s FOR UPDATE", [messages[-1].pk])
        # Time enough to confirm before expire_at passes, even on a busy machine.
        when = timezone.now() + timedelta(seconds=2)
        preview = deletion_preview(owner=owner, actor=owner, ids=[messages[0].pk], mode="expire", expire_at=when)
        scheduled = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
        wait_for(_someone_waits_for_a_row, timeout=30)
        for child in worker.children():
            child.kill()
        time.sleep(0.5)
        # Read while the row is still locked: a redelivered run cannot have finished either.
        assert DeletionRequest.objects.get(pk=scheduled.pk).status == "scheduled"
        assert list(Message.objects.filter(pk__in=[m.pk for m in messages]).values_list("content", flat=True)) == [
            f"fact {i}" for i in range(6)
        ]
        blocker.rollback()

    deletion = wait_for(lambda: DeletionRequest.objects.filter(pk=scheduled.pk, status="executed").first(), 30)
    assert deletion.deleted_ids == sorted(m.pk for m in messages)
    assert taint_violations(owner_id=owner.pk) == []


def _vacuum_count(owner_id: int) -> int:
    """VACUUMs of the owner's part of chat_message (its partition: the eraser vacuums that, provenance/erasure)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = %s",
            [partition_of(table="chat_message", owner_id=owner_id)],
        )
        return cursor.fetchone()[0]


def _someone_waits_for_a_row() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted")
        return cursor.fetchone()[0] > 0
