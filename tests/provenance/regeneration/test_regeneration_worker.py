"""Regenerating deletions on a real Celery worker: order, streaming, races with turns, failures and resume."""

import json
import random
import time

import pytest

from chat.models import ContextEdge, Message, Turn
from chat.turns.start import turn_create
from chat.turns.stream import channel
from core.streams.pubsub import redis_client
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.deletions.undo import deletion_resume
from provenance.dependents import taint_violations
from provenance.models import DeletionRequest
from provenance.regeneration.replies import regeneration_progress
from tests.fake_openai import FakeOpenAI
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def finished(turn_ids) -> bool:
    return not Turn.objects.filter(pk__in=turn_ids, status__in=["pending", "running"]).exists()


def settled(deletion_id: int) -> DeletionRequest | None:
    return DeletionRequest.objects.filter(pk=deletion_id, regeneration_finished_at__isnull=False).first()


def regenerate(owner, **select) -> DeletionRequest:
    preview = deletion_preview(owner=owner, actor=owner, mode="soft", derived="regenerate", **select)
    return deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)


def test_worker_rewrites_replies_in_order_and_streams_them_like_turns(start_worker, owner, thread):
    start_worker(concurrency=1)
    turns = [turn_create(thread=thread, content=text) for text in ["I live in Oslo.", "I play the cello."]]
    wait_for(lambda: finished([t.pk for t in turns]))
    asks = [turn_create(thread=thread, content=q) for q in ["Where do I live?", "Which instrument do I play?"]]
    wait_for(lambda: finished([t.pk for t in asks]))
    for ask in asks:
        ask.refresh_from_db()
    pubsub = redis_client().pubsub(ignore_subscribe_messages=True)
    pubsub.psubscribe(channel("*"))  # under the instance prefix (streams-scale)

    done = regenerate(owner, exact="I live in Oslo")
    finished_deletion = wait_for(lambda: settled(done.pk), timeout=60)

    progress = regeneration_progress(deletion=finished_deletion)
    assert (progress.state, progress.total, progress.rewritten, progress.failed) == ("done", 1, 1, 0)
    [turn] = progress.turns
    assert (turn.user_message_id, turn.replaces) == (asks[0].user_message_id, asks[0].reply_id)
    assert turn.reply.content == "I don't have anything in memory about that yet."
    assert finished_deletion.receipt["passed"] is True
    assert taint_violations(owner_id=owner.pk) == []
    events: dict[str, list[str]] = {}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "changed" not in events.get(channel(turn.pk), []):
        message = pubsub.get_message(timeout=0.5)
        if message is None:
            continue
        payload = json.loads(message["data"])
        events.setdefault(message["channel"].decode(), []).append(payload["event"])
    pubsub.close()
    assert events[channel(turn.pk)][-1] == "changed"
    assert "token" in events[channel(turn.pk)]


def test_turns_in_flight_while_regenerating_deletions_run_leave_no_taint(start_worker, owner, thread):
    start_worker(concurrency=2)
    rng = random.Random(11)
    facts = [f"My friend number {i} is called Name{i}." for i in range(8)]
    seeds = [turn_create(thread=thread, content=fact) for fact in facts]
    wait_for(lambda: finished([t.pk for t in seeds]), timeout=60)
    asks = [turn_create(thread=thread, content=f"What is my friend number {i} called?") for i in range(8)]
    wait_for(lambda: finished([t.pk for t in asks]), timeout=60)

    done = []
    for _ in range(4):
        in_flight = [
            turn_create(thread=thread, content=f"Who is my friend number {rng.randrange(8)}?") for _ in range(4)
        ]
        time.sleep(rng.uniform(0, 0.2))
        users = list(Message.objects.filter(owner=owner, status="active", role="user").values_list("pk", flat=True))
        done.append(regenerate(owner, ids=[rng.choice(users)]))
        wait_for(lambda in_flight=in_flight: finished([t.pk for t in in_flight]), timeout=60)
    # The first deletion selects the first question still in flight: it rewrites the replies
    # that question fed only if they committed before the deletion did, which on a busy
    # machine they may not have. A deletion that rewrites nothing has no regeneration to wait for.
    regenerating = [deletion for deletion in done if deletion.regenerate_ids]
    # The second one removes a fact that the answer to its question used, committed before the rounds.
    assert done[1] in regenerating
    wait_for(lambda: all(settled(d.pk) for d in regenerating), timeout=90)

    assert taint_violations(owner_id=owner.pk) == []
    for deletion in done:
        deletion.refresh_from_db()
        assert deletion.receipt["passed"] is True, deletion.receipt
        if deletion not in regenerating:
            assert (regeneration_progress(deletion=deletion), deletion.receipt["checks"].get("regeneration")) == (
                None,
                None,
            )
            continue
        check = deletion.receipt["checks"]["regeneration"]
        assert (check["context_violations"], check["taint_violations"], check["pending"]) == ([], [], [])
    # Every live rewritten reply's context is live now, too.
    rewritten = Turn.objects.filter(
        deletion_id__in=[deletion.pk for deletion in done], reply__status="active"
    ).values_list("reply_id", flat=True)
    sources = ContextEdge.objects.filter(target_id__in=list(rewritten)).values_list("source__status", flat=True)
    assert set(sources) <= {"active"}
    assert len(rewritten) > 0


@pytest.fixture
def fake_llm(start_worker):
    with FakeOpenAI(default_text="A rewritten reply.") as fake:
        start_worker(
            {
                "DELLM_LLM": "openai",
                "OPENAI_BASE_URL": fake.url,
                "OPENAI_API_KEY": "test-key",
                "DELLM_CHAT_MODEL": "fake-model",
                "DELLM_LLM_TIMEOUT": "1",
                "DELLM_RETRY_BACKOFF": "0.05",
                "DELLM_LLM_MAX_RETRIES": "2",
            },
            concurrency=1,
        )
        yield fake


def test_failed_rewrite_is_listed_and_resume_finishes_it(fake_llm, owner, thread):
    told = turn_create(thread=thread, content="I live in Oslo.")
    wait_for(lambda: finished([told.pk]))
    asks = [turn_create(thread=thread, content=q) for q in ["Where do I live?", "Is Oslo where I live?"]]
    wait_for(lambda: finished([t.pk for t in asks]))
    for turn in [told, *asks]:
        turn.refresh_from_db()
    # The first rewrite gets a client error (not retried), then a transient 500 is retried.
    fake_llm.script = [("status", 400), ("status", 500)]

    done = regenerate(owner, ids=[told.user_message_id])
    finished_deletion = wait_for(lambda: settled(done.pk), timeout=60)
    progress = regeneration_progress(deletion=finished_deletion)
    rewritable = [t.reply_id for t in asks]
    assert (progress.state, progress.total, progress.rewritten, progress.failed) == ("failed", 2, 1, 1)
    assert [(t.replaces, t.status) for t in progress.turns] == [(rewritable[0], "failed"), (rewritable[1], "done")]
    assert progress.turns[0].error == "The language model answered HTTP 400."
    assert finished_deletion.receipt["checks"]["regeneration"]["failed"] == [rewritable[0]]

    deletion_resume(deletion_id=done.pk, owner_id=owner.pk)
    again = wait_for(lambda: settled(done.pk), timeout=60)
    progress = regeneration_progress(deletion=again)
    assert (progress.state, progress.rewritten, progress.failed) == ("done", 2, 0)
    assert progress.turns[0].reply.content == "A rewritten reply."
    assert taint_violations(owner_id=owner.pk) == []
