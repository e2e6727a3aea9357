"""Drawing facts from the user's messages, in order, in bounded passes (the worker's `chat.facts_extract`).

Each owner has a cursor (`FactCursor.seq`): every user message up to it was
read. A pass reads the next DELLM_FACTS_BATCH live user messages after it
(typed turns, `/v1` and imported messages alike: every door stores through
the writer, with the owner's next sequence number), draws each one's
statements (`chat.statements` offline, `chat.facts.model` with a model),
stores them through the writer in one transaction (`facts_store_many`: a fact
only while its source is live) and moves the cursor on. A reply is never a source: it is not a fact
about the user. A statement the user declined from that message
(`FactDecline`) is never drawn again. The new facts are embedded after their
transaction, like any message.
"""

import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import Max

from chat.facts.model import ExtractionFailed, model_statements
from chat.models import FactCursor, FactDecline, Message
from chat.statements import Statement, statements
from chat.writer.facts import NewFact, facts_store_many
from chat.writer.vectors import messages_index_embed
from core.api.budgets import budget_take

logger = logging.getLogger(__name__)


def extractor() -> str:
    """`rules` or `model` (DELLM_FACTS_EXTRACTOR; `auto`: the model when one is configured)."""
    chosen = settings.DELLM_FACTS_EXTRACTOR
    if chosen == "auto":
        return "model" if settings.DELLM_LLM == "openai" else "rules"
    return chosen


@dataclass
class Pass:
    read: int = 0
    stored: int = 0
    failed: int = 0
    # More messages wait after this pass (its batch was full, or the model's budget ran out).
    more: bool = False
    # Seconds until the owner's model budget has room again (None: not waiting on it).
    wait: float | None = None
    # Another pass of the owner was running: this one read nothing.
    busy: bool = False


def _statements(*, owner_id: int, message_id: int, text: str, how: str) -> list[Statement]:
    if how == "rules":
        return statements(text)
    return model_statements(text)


# One pass per owner at a time (a shared lock in the cache, held at most this long after the pass last made
# progress: each model call renews it): two passes would read the same messages, and with a model, pay for
# them twice. A pass asked for meanwhile is run after it.
PASS_LOCK_SECONDS = 600


def facts_extract_pass(*, owner_id: int, limit: int | None = None) -> Pass:
    """Read the owner's next user messages for facts and store them; what the pass did.

    While another pass of the owner runs, nothing (`busy`), and that pass says `more` when it ends.
    """
    lock, again = f"facts:pass:{owner_id}", f"facts:again:{owner_id}"
    if not cache.add(lock, 1, timeout=PASS_LOCK_SECONDS):
        cache.set(again, 1, timeout=PASS_LOCK_SECONDS)
        return Pass(busy=True)
    try:
        done = _pass(owner_id=owner_id, limit=settings.DELLM_FACTS_BATCH if limit is None else limit, lock=lock)
    finally:
        cache.delete(lock)
    if cache.delete(again):
        done.more = True
    return done


def _unchanged(*, owner_id: int, pk: int, content: str) -> bool:
    """Whether the message is still live with these words (one indexed read)."""
    live = Message.objects.filter(owner_id=owner_id, pk=pk, status__in=Message.LIVE)
    return live.values_list("content", flat=True).first() == content


def _pass(*, owner_id: int, limit: int, lock: str) -> Pass:
    cursor, _ = FactCursor.objects.get_or_create(owner_id=owner_id)
    start = cursor.seq
    # Everything up to the newest committed message is read by the end of this pass (commits follow
    # sequence numbers: each is given and committed under the owner's lock).
    top = Message.objects.filter(owner_id=owner_id).aggregate(top=Max("seq"))["top"] or 0
    rows = list(
        Message.objects.filter(
            owner_id=owner_id,
            seq__gt=start,
            seq__lte=top,
            role=Message.Role.USER,
            status__in=Message.LIVE,
            tool_calls__isnull=True,
        )
        .exclude(content="")
        .order_by("seq")
        .values_list("pk", "seq", "content", "source_created_at", "created_at")[:limit]
    )
    done = Pass(read=len(rows), more=len(rows) == limit)
    how = extractor()
    declined = set(
        FactDecline.objects.filter(owner_id=owner_id, source_id__in=[row[0] for row in rows]).values_list(
            "source_id", "subject"
        )
    )
    last = start
    drawn: list[NewFact] = []
    failed: list[int] = []
    for pk, seq, content, source_created_at, created_at in rows:
        if how == "model":
            taken, wait = budget_take(user_id=owner_id, scope="facts", wanted=1)
            if not taken:
                done.more, done.wait = True, wait
                break
            # Each call is progress: the lock lives PASS_LOCK_SECONDS after the last one, however long the pass.
            cache.touch(lock, PASS_LOCK_SECONDS)
            # Read again right before the call: the batch was read minutes ago, and a message purged,
            # redacted or erased since is never sent upstream after its receipt says it is gone.
            if not _unchanged(owner_id=owner_id, pk=pk, content=content):
                if not get_user_model().objects.filter(pk=owner_id).exists():
                    break
                last = seq
                continue
        try:
            found = _statements(owner_id=owner_id, message_id=pk, text=content, how=how)
        except ExtractionFailed:
            logger.warning("facts: extraction of message %s failed", pk)
            failed.append(pk)
            found = []
        drawn += [
            NewFact(source=pk, subject=s.subject, text=s.text, said_at=source_created_at or created_at)
            for s in found
            if (pk, s.subject) not in declined
        ]
        last = seq
    # One write for the whole batch (a statement whose message was deleted meanwhile is dropped there).
    new, _ = facts_store_many(owner_id=owner_id, facts=drawn, extractor=how) if drawn else ([], [])
    reached = last if done.more else top
    done.failed, done.stored = len(failed), len(new)
    # Compare-and-set: a pass that ran meanwhile moved the cursor, and its own end stands.
    updated = FactCursor.objects.filter(owner_id=owner_id, seq=start)
    if failed:
        kept = (cursor.failed + failed)[-FactCursor.FAILED_KEPT :]
        updated.update(seq=reached, failed=kept)
    else:
        updated.update(seq=reached)
    messages_index_embed(owner_id=owner_id, ids=new)
    return done


def facts_pending(*, owner_id: int) -> int:
    """How many user messages wait to be read for facts."""
    start = FactCursor.objects.filter(owner_id=owner_id).values_list("seq", flat=True).first() or 0
    return (
        Message.objects.filter(owner_id=owner_id, seq__gt=start, role=Message.Role.USER, status__in=Message.LIVE)
        .exclude(content="")
        .count()
    )
