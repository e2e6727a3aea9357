"""Deletion receipts: checks run right after a deletion executes, stored with its audit row.

Confirmed over HTTP, the checks run after the answer, in a thread that reads
the forget probe on the snapshot the deletion's transaction exported
(`probe_handoff`); until the receipt is written the deletion is `verifying`.

A receipt says, in ids and counts, whether the deletion happened completely:

- `taint`: invariant I1 holds for the owner (no live message has a removed parent).
- `gone`: none of the matched or deleted messages is live. This is how a
  phrase (or semantic) selection is checked: its text is never stored and the
  preview and the confirmation are separate requests, so the phrase cannot be
  searched again after the fact; the ids it matched can.
- `forget`: a nearest-neighbour search with the embedding of every message in
  Dep(M) finds no live message, at the context threshold, that was not already
  a neighbour just before execution; and the words of those messages (their
  full-text query, weighed as context retrieval weighs a question) match no
  live message above the lexical floor that did not match them before. The
  embeddings and words are read inside the deletion's transaction (a purge
  destroys them) and live only in memory, in a `ForgetProbe`, until the check
  has run.
- `purge` (purges and fired expiries): the deleted rows keep no content and no embedding.
- `indexes`: no live message's index was built from a deleted message
  (`index_sources`, chat/index/context.py): the writer recomputed each such
  index from what is live in the deletion's transaction, and `recomputed`
  says how many.

A failed check is loud: status `verification_failed`, an error log (ids
only), and a warning on the admin's deletion audit.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from threading import Event, Lock, Thread
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from chat.index.context import index_stale
from chat.index.vectors import vector_literal
from chat.models import LIVE_STATUSES, ContextEdge, Message, Turn
from chat.retrieval.fused import lexical_matches
from chat.retrieval.terms import QueryTerms, query_terms
from core.db.locks import owner_lock
from provenance.deletions.selectors import agent_reads_attach
from provenance.dependents import taint_violations
from provenance.models import DeletionRequest

logger = logging.getLogger(__name__)

Status = DeletionRequest.Status

# Every pair (live message, probe) at or above the threshold. Exact, like
# context retrieval: no index, so no neighbour is missed under the owner filter.
# The probes are parsed into vectors once (`::vector[]`), not once per pair:
# that cast cost 150 us a pair, 154 s for 100 probes over 10k messages.
# A probe is compared only with vectors of its own embedding model (during a
# `reembed` switch both kinds exist; other models' vectors may have another
# dimension and are never comparable): the CASE guarantees the order.
_NEIGHBOURS_SQL = f"""
SELECT DISTINCT m.id
FROM {Message._meta.db_table} m, unnest(%(probes)s::vector[], %(models)s::text[]) AS p(vector, model)
WHERE m.owner_id = %(owner)s AND m.status = ANY(%(live)s) AND m.embedding IS NOT NULL
  AND NOT (m.id = ANY(%(exclude)s)) AND m.embedding_model = p.model
  AND CASE WHEN m.embedding_model = p.model THEN 1 - (m.embedding <=> p.vector) >= %(threshold)s ELSE false END
"""


@dataclass(frozen=True)
class ForgetProbe:
    """What the forget test needs from before execution. Memory only: never stored, logged or sent."""

    owner_id: int
    # Vector literals of the embeddings of Dep(M); kept out of repr so no
    # traceback or log line ever prints them (embeddings can be inverted).
    vectors: list[str] = field(repr=False)
    # How many messages of Dep(M) had an embedding; `vectors` probes the first of them.
    embedded: int
    neighbours_before: frozenset[int]
    # The full-text queries of the same messages (lexemes of deleted text:
    # out of repr for the same reason), and what they matched before.
    terms: list[QueryTerms] = field(default_factory=list, repr=False)
    lexical_before: frozenset[int] = frozenset()
    # The floor's whole each of `terms` was measured against before (`chat.retrieval.fused.lexical_matches`).
    lexical_reaches: list[float | None] = field(default_factory=list)
    # The owner's highest message id at execution: what the check compares.
    horizon: int = 0
    # The embedding model of each of `vectors`.
    models: list[str] = field(default_factory=list)
    # The messages whose index (search vector, vector) the deletion recomputed
    # because it was built from a removed message (chat/index/context.py).
    reindexed: frozenset[int] = frozenset()


def forget_threshold() -> float:
    # The context threshold, not the (higher) semantic-selection one: the
    # question is whether anything near the deleted messages could still flow
    # into a reply, and the context threshold is where that starts. Comparing
    # with the neighbours before execution keeps old, unrelated neighbours from
    # counting; comparing sets above a threshold (not top-k) keeps messages
    # that merely move up the ranking from counting.
    return settings.DELLM_CONTEXT_THRESHOLD


def _lexical_neighbours(
    *, owner_id: int, terms: list[QueryTerms], exclude: set[int], reaches: list[float | None] | None = None
) -> tuple[set[int], list[float | None]]:
    """Every query's lexical matches, and the whole each was measured against (`reaches`: those given instead)."""
    found: set[int] = set()
    measured: list[float | None] = []
    for i, query in enumerate(terms):
        ids, reach = lexical_matches(
            owner_id=owner_id,
            terms=query,
            exclude=exclude,
            floor=settings.DELLM_LEXICAL_FLOOR,
            reach=reaches[i] if reaches is not None else None,
        )
        found |= ids
        measured.append(reach)
    return found, measured


def _live_neighbours(*, owner_id: int, vectors: list[str], models: list[str], exclude: set[int]) -> set[int]:
    if not vectors:
        return set()
    params: dict[str, Any] = {
        "probes": vectors,
        "models": models,
        "owner": owner_id,
        "live": list(LIVE_STATUSES),
        "exclude": sorted(exclude),
        "threshold": forget_threshold(),
    }
    with connection.cursor() as cursor:
        cursor.execute(_NEIGHBOURS_SQL, params)
        return {row[0] for row in cursor.fetchall()}


def forget_probe(*, owner_id: int, message_ids: set[int], roots: list[int]) -> ForgetProbe:
    """Read the embeddings of Dep(M) and their live neighbours outside Dep(M), before execution.

    Called by the deletion inside its transaction, under the owner's lock, or
    by `probe_handoff`'s thread on the snapshot that transaction exported
    (the same rows). Its cost (probes x the owner's messages) is bounded: at most
    DELLM_FORGET_PROBES embeddings, the matched messages first (the text the
    user asked to forget), then their dependents oldest first (the nearest
    copies of it). The receipt records how many of how many were probed.
    """
    embedded = Message.objects.filter(owner_id=owner_id, pk__in=message_ids, embedding__isnull=False)
    root_set = set(roots)
    order = sorted(embedded.values_list("pk", flat=True), key=lambda pk: (pk not in root_set, pk))
    chosen = order[: settings.DELLM_FORGET_PROBES]
    rows: dict[int, Any] = {
        pk: (vector, model)
        for pk, vector, model in Message.objects.filter(owner_id=owner_id, pk__in=chosen).values_list(
            "pk", "embedding", "embedding_model"
        )
    }
    vectors = [vector_literal(rows[pk][0]) for pk in chosen]
    models = [rows[pk][1] for pk in chosen]
    before = _live_neighbours(owner_id=owner_id, vectors=vectors, models=models, exclude=message_ids)
    # The same messages' words, weighed once, now: after a purge their own
    # rows no longer count in the document frequencies, and a shifted weight
    # must not pass for a new match.
    texts = dict(
        Message.objects.filter(owner_id=owner_id, pk__in=chosen).exclude(content="").values_list("pk", "content")
    )
    terms = [query_terms(owner_id=owner_id, text=texts[pk]) for pk in chosen if pk in texts]
    horizon = Message.objects.filter(owner_id=owner_id).aggregate(top=Max("pk"))["top"] or 0
    lexical_before, reaches = _lexical_neighbours(owner_id=owner_id, terms=terms, exclude=message_ids)
    return ForgetProbe(
        owner_id=owner_id,
        vectors=vectors,
        embedded=len(order),
        neighbours_before=frozenset(before),
        models=models,
        terms=terms,
        lexical_before=frozenset(lexical_before),
        lexical_reaches=reaches,
        horizon=horizon,
    )


# How long a deletion waits for the verifying thread to take over its snapshot
# before it reads the probe itself (the request pays for it, as it used to).
HANDOFF_WAIT_S = 5.0


class _Slots:
    """Verifying threads running in this process, at most DELLM_VERIFY_THREADS at once.

    Each holds a pooled connection of its own beside its request's, and waits for the owner's lock:
    unbounded, a burst of confirms took every connection of the pool while their requests waited for
    threads that waited for a connection, and the requests behind them got 503s. Past the bound a
    deletion reads its probe and writes its receipt in its own request, as before the handoff.
    """

    def __init__(self) -> None:
        self._lock = Lock()
        self.busy = 0

    def take(self) -> bool:
        with self._lock:
            if self.busy >= settings.DELLM_VERIFY_THREADS:
                return False
            self.busy += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.busy -= 1


_SLOTS = _Slots()


class _Handoff:
    """Who reads the probe: the verifying thread, once it holds the snapshot, or the deletion, if it gave up first."""

    def __init__(self) -> None:
        self._lock = Lock()
        self._decided = Event()
        self._owner = ""

    def claim(self, who: str) -> bool:
        with self._lock:
            if not self._owner:
                self._owner = who
                self._decided.set()
            return self._owner == who

    def wait(self, timeout: float) -> bool:
        """True when the thread took over within `timeout`; otherwise the caller has it."""
        self._decided.wait(timeout)
        return not self.claim("deletion")


def probe_handoff(
    *, deletion_id: int, owner_id: int, message_ids: set[int], roots: list[int], then: Callable[[ForgetProbe], Any]
) -> ForgetProbe | None:
    """Read the forget probe outside the deletion's request; None when a thread took it over.

    Called inside the deletion's transaction, under the owner's lock, before
    anything is removed. The transaction exports its snapshot
    (`pg_export_snapshot`) and a thread opens a REPEATABLE READ transaction
    on it: it sees the owner's rows exactly as the deletion does now, even
    after the purge has committed, so its probe equals the one read here. The
    deletion waits only until the thread holds the snapshot (milliseconds),
    then removes and commits; the thread reads the probe and calls `then`
    with it (`deletion_verify` and what follows), which waits for the owner's
    lock, so it runs after the deletion's commit, or finds the deletion not
    executed if it rolled back. If the thread cannot take the snapshot within
    HANDOFF_WAIT_S, the probe is read here and returned, as before. The probe
    stays in the thread's memory, never stored or sent.
    """
    members = set(message_ids)
    if not _SLOTS.take():
        return forget_probe(owner_id=owner_id, message_ids=members, roots=roots)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_export_snapshot()")
            snapshot = cursor.fetchone()[0]
    except Exception:
        _SLOTS.give_back()
        raise
    handoff = _Handoff()

    def run() -> None:
        taken = False
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    cursor.execute("SET TRANSACTION SNAPSHOT %s", [snapshot])
                taken = handoff.claim("thread")
                if not taken:
                    return
                probe = forget_probe(owner_id=owner_id, message_ids=members, roots=roots)
            then(probe)
        except Exception:
            if taken:
                # Its receipt stays pending (`verifying`): never a receipt that did not check.
                logger.exception("deletion %s: the background verification failed", deletion_id)
            else:
                # Not taken: the deletion reads the probe itself.
                handoff.claim("deletion")
                logger.warning("deletion %s: the verifying thread could not take the snapshot", deletion_id)
        finally:
            connection.close()
            if taken:
                _SLOTS.give_back()  # the thread's once it took over; the deletion's otherwise

    Thread(target=run, name=f"verify-deletion-{deletion_id}").start()
    if handoff.wait(HANDOFF_WAIT_S):
        return None
    _SLOTS.give_back()
    return forget_probe(owner_id=owner_id, message_ids=members, roots=roots)


def _vouched(*, deletion: DeletionRequest, probe: ForgetProbe, ids: set[int], before: frozenset[int]) -> set[int]:
    """New neighbours (`ids` less those found `before` execution) whose provenance accounts for them.

    A reply with a context of live messages only (a turn racing the deletion,
    a rewritten reply, or one stored before execution and embedded since); this
    deletion's redacted replacement (near its original by design, text the
    user approved); a message the user typed in a chat turn, embedded by its
    turn meanwhile (the user telling it again is no failure to forget).
    Anything else new near the deleted messages (a copy with no provenance)
    still fails the test.
    """
    candidates = ids - before
    owner_id = deletion.owner_id
    typed = set(
        Turn.objects.filter(owner_id=owner_id, user_message_id__in=candidates).values_list("user_message_id", flat=True)
    )
    # A recomputed index (`probe.reindexed`) holds live words only: its own message's and its live previous turn's.
    typed |= candidates & probe.reindexed
    later = {pk for pk in candidates if pk > probe.horizon}
    replacements = {int(new) for new in deletion.redacted.values()}
    # Replies new or old: a reply stored before execution is embedded after its commit
    # (chat/writer/vectors.py), so it may first appear near the probes only now.
    edges = ContextEdge.objects.filter(owner_id=owner_id, target_id__in=candidates - typed)
    with_live_context = set(edges.values_list("target_id", flat=True)) - set(
        edges.filter(source__owner_id=owner_id)
        .exclude(source__status__in=LIVE_STATUSES)
        .values_list("target_id", flat=True)
    )
    return typed | (later & replacements) | with_live_context


# The forget check of a deletion whose verifying thread stopped before writing its receipt: it cannot run again
# (it compares with the neighbours before execution, read only in that thread's memory), so it fails, saying why.
FORGET_NOT_RUN = (
    "Not run: the process verifying this deletion stopped before its receipt was written, and the state before "
    "the deletion that this check compares with is gone."
)


def _forget_not_run() -> dict:
    return {
        "passed": False,
        "probes": 0,
        "of": 0,
        "threshold": forget_threshold(),
        "new_neighbours": [],
        "lexical_floor": settings.DELLM_LEXICAL_FLOOR,
        "new_lexical_neighbours": [],
        "not_run": FORGET_NOT_RUN,
    }


def _checks(*, deletion: DeletionRequest, probe: ForgetProbe | None) -> dict:
    deleted = set(deletion.deleted_ids)
    gone = sorted(set(deletion.matched_ids) | deleted)
    messages = Message.objects.filter(owner_id=deletion.owner_id)
    still_live = sorted(messages.filter(pk__in=gone, status__in=LIVE_STATUSES).values_list("pk", flat=True))
    violations = [[message, parent] for _, message, parent in taint_violations(owner_id=deletion.owner_id)]
    stale_indexes = index_stale(owner_id=deletion.owner_id, removed=deleted)
    checks = {
        "taint": {"passed": not violations, "violations": violations},
        "gone": {"passed": not still_live, "checked": len(gone), "live": still_live},
        "forget": _forget_not_run() if probe is None else _forget_check(deletion=deletion, probe=probe),
        "purge": None,
        "indexes": {
            "passed": not stale_indexes,
            "recomputed": 0 if probe is None else len(probe.reindexed),
            "stale": stale_indexes,
        },
    }
    if deletion.mode != DeletionRequest.Mode.SOFT:
        rows = messages.filter(pk__in=deleted)
        with_content = sorted(rows.exclude(content="").values_list("pk", flat=True))
        with_embedding = sorted(rows.filter(embedding__isnull=False).values_list("pk", flat=True))
        checks["purge"] = {
            "passed": not with_content and not with_embedding,
            "checked": len(deleted),
            "with_content": with_content,
            "with_embedding": with_embedding,
        }
    return checks


def _forget_check(*, deletion: DeletionRequest, probe: ForgetProbe) -> dict:
    after = _live_neighbours(owner_id=deletion.owner_id, vectors=probe.vectors, models=probe.models, exclude=set())
    new_neighbours = sorted(
        after
        - probe.neighbours_before
        - _vouched(deletion=deletion, probe=probe, ids=after, before=probe.neighbours_before)
    )
    # The lexical probe vouches for the same messages: a redacted replacement
    # or a rewritten reply shares words with what it replaces by design.
    # Against the whole measured before: a message whose words did not change is no new match.
    lexical_after, _ = _lexical_neighbours(
        owner_id=deletion.owner_id, terms=probe.terms, exclude=set(), reaches=probe.lexical_reaches
    )
    new_lexical = sorted(
        lexical_after
        - probe.lexical_before
        - _vouched(deletion=deletion, probe=probe, ids=lexical_after, before=probe.lexical_before)
    )
    return {
        "passed": not new_neighbours and not new_lexical,
        "probes": len(probe.vectors),
        "of": probe.embedded,
        "threshold": forget_threshold(),
        "new_neighbours": new_neighbours,
        "lexical_floor": settings.DELLM_LEXICAL_FLOOR,
        "new_lexical_neighbours": new_lexical,
    }


def _agent_reads(deletion: DeletionRequest) -> dict[str, Any]:
    """The MCP reads of what this deletion removed, as JSON for the receipt (ids, client names, times)."""
    agent_reads_attach([deletion])
    reads = deletion.agent_reads
    return {**reads, "reads": [{**read, "read_at": read["read_at"].isoformat()} for read in reads["reads"]]}


def deletion_verify(*, deletion_id: int, probe: ForgetProbe) -> DeletionRequest:
    """Check an executed deletion and store its receipt.

    Runs after the deletion's transaction has committed, under the owner's
    lock so no reply or other deletion changes the history while it looks.
    Side effects in order: the receipt and `verified_at` are written; if a
    check failed, the status becomes `verification_failed` and an error is
    logged with ids only. A deletion that is no longer `executed` (undone in
    the meantime, or given a late receipt by `deletions_unverified_sweep`)
    is returned unchanged.
    """
    return _receipt_write(deletion_id=deletion_id, owner_id=probe.owner_id, probe=probe)


def deletions_unverified_sweep(*, now: datetime | None = None) -> list[int]:
    """Receipts for executed deletions still without one DELLM_VERIFY_STALE_AFTER after execution.

    Their verifying thread stopped (the process confirming them was killed):
    every check runs now except the forget test, which compares with the
    neighbours before execution, read only in that thread's memory; it fails
    and says why (`not_run`), so the deletion becomes `verification_failed`
    rather than waiting, `verifying`, for ever. Returns their ids.
    """
    now = now or timezone.now()
    stale = DeletionRequest.objects.filter(
        status=Status.EXECUTED,
        receipt__isnull=True,
        executed_at__lt=now - timedelta(seconds=settings.DELLM_VERIFY_STALE_AFTER),
    ).values_list("pk", "owner_id")
    swept = []
    for deletion_id, owner_id in stale:
        if _receipt_write(deletion_id=deletion_id, owner_id=owner_id, probe=None).receipt is not None:
            swept.append(deletion_id)
    return swept


def _receipt_write(*, deletion_id: int, owner_id: int, probe: ForgetProbe | None) -> DeletionRequest:
    with transaction.atomic():
        owner_lock(owner_id)
        deletion = DeletionRequest.objects.select_for_update().get(pk=deletion_id, owner_id=owner_id)
        if deletion.status != Status.EXECUTED or (probe is None and deletion.receipt is not None):
            return deletion
        checks = _checks(deletion=deletion, probe=probe)
        failed = sorted(name for name, check in checks.items() if check is not None and not check["passed"])
        deletion.receipt = {"passed": not failed, "failed": failed, "checks": checks}
        reads = _agent_reads(deletion)
        if reads["count"]:
            # Only when an MCP client read any of it: a receipt nobody's agent touched keeps its shape.
            deletion.receipt["agent_reads"] = reads
        deletion.verified_at = timezone.now()
        if failed:
            deletion.status = Status.VERIFICATION_FAILED
        deletion.save(update_fields=["receipt", "verified_at", "status"])
    if failed:
        purge = checks["purge"] or {"with_content": [], "with_embedding": []}
        logger.error(
            "deletion %s of owner %s FAILED verification %s: taint %s, live %s, new neighbours %s, residue %s",
            deletion.pk,
            deletion.owner_id,
            failed,
            checks["taint"]["violations"],
            checks["gone"]["live"],
            sorted(set(checks["forget"]["new_neighbours"]) | set(checks["forget"]["new_lexical_neighbours"])),
            sorted(set(purge["with_content"]) | set(purge["with_embedding"])),
        )
    else:
        logger.info(
            "deletion %s verified: %s probes, %s ids checked",
            deletion.pk,
            checks["forget"]["probes"],
            checks["gone"]["checked"],
        )
    return deletion
