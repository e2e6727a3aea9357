"""What deleting a message with N derived replies costs when they are regenerated (offline responder).

A throwaway user gets one fact and N question/reply turns whose replies each
have the fact in their context (stored through the one writer with exactly
those edges, so |Dep(fact)| - 1 is N); then the fact is deleted with
`derived="regenerate"` and every reply is rewritten in-process, in order,
through the ordinary turn protocol.
"""

import secrets
import time

from django.contrib.auth import get_user_model
from django.db import transaction

from chat.index.embeddings import get_embedder
from chat.models import Message, Thread, Turn
from chat.writer import Source, message_store
from dellm_site.celery import app as celery_app
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.dependents import taint_violations

USERNAME_PREFIX = "bench-regen-"


def _history(*, owner, replies: int) -> Message:
    thread = Thread.objects.create(owner=owner, title="regeneration bench")
    texts = ["I live in Paris and work as a nurse."]
    for i in range(replies):
        texts += [
            f"Question {i}: where do I live and work?",
            "From what you told me: “I live in Paris and work as a nurse.”",
        ]
    vectors = get_embedder().embed(texts)
    with transaction.atomic():
        fact = message_store(
            owner_id=owner.pk, thread_id=thread.pk, role="user", content=texts[0], embedding=vectors[0]
        )
        turns = []
        for i in range(1, len(texts), 2):
            question = message_store(
                owner_id=owner.pk, thread_id=thread.pk, role="user", content=texts[i], embedding=vectors[i]
            )
            reply = message_store(
                owner_id=owner.pk,
                thread_id=thread.pk,
                role="assistant",
                content=texts[i + 1],
                embedding=vectors[i + 1],
                sources=[Source(id=question.pk, rank=0, score=1.0), Source(id=fact.pk, rank=1, score=0.6)],
            )
            turns.append(Turn(owner=owner, user_message=question, reply=reply, status=Turn.Status.DONE))
        Turn.objects.bulk_create(turns)
    return fact


def regeneration_bench(*, replies: int = 100) -> dict:
    """Seconds for preview, confirm (one transaction) and the rewrites; the user is deleted afterwards."""
    owner = get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{secrets.token_hex(4)}")
    eager = celery_app.conf.task_always_eager
    try:
        fact = _history(owner=owner, replies=replies)
        celery_app.conf.task_always_eager = True
        started = time.perf_counter()
        preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[fact.pk], derived="regenerate")
        previewed = time.perf_counter()
        # Eager: confirm returns after the receipt and every rewrite have run.
        done = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
        finished = time.perf_counter()
        turns = Turn.objects.filter(deletion_id=done.pk)
        rewritten = turns.filter(status=Turn.Status.DONE).count()
        commit_seconds = (done.executed_at - done.confirmed_at).total_seconds()
        return {
            "replies": replies,
            "planned": len(preview.regenerate_ids),
            "rewritten": rewritten,
            "preview_s": round(previewed - started, 3),
            "confirm_transaction_s": round(commit_seconds, 3),
            "confirm_to_all_rewritten_s": round(finished - previewed, 3),
            "per_reply_ms": round(1000 * (finished - previewed) / max(rewritten, 1), 1),
            "receipt_passed": done.receipt["passed"],
            "taint_violations": len(taint_violations(owner_id=owner.pk)),
        }
    finally:
        celery_app.conf.task_always_eager = eager
        owner.delete()
