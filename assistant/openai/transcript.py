"""Chat turns requested through the OpenAI-compatible endpoint (`/v1/chat/completions`).

A client of that endpoint resends the whole conversation on every request.
DeLLM never hands that transcript to the model: the model sees DeLLM's own
context (retrieval over the owner's stored, live messages, each with an edge
to the reply) plus the client's system prompt, which is stored too: a
`system` message of the thread (one per distinct text, reused while live),
with an edge to each reply it shaped, never retrieved as memory
(chat.turns.start.turn_create). The transcript is used for three things only:

1. **Which thread.** An explicit key wins: the `X-DeLLM-Thread` header, else
   `metadata.dellm_thread`, naming one of the owner's threads by id (the
   response returns that id). Without one, the transcript itself is the key:
   the thread in which the transcript's earlier messages sit at the same
   positions with the same text. Only live messages can anchor that match,
   and they are compared with the stored text directly, so nothing derived
   from a message's text (no hash, no fingerprint) is kept anywhere: a purge
   leaves nothing to recognise the purged text by. The OpenAI `user` field is
   not a thread key: it names the end user, and clients fill it with one value
   for all of a user's conversations.
2. **What is new.** Earlier messages are aligned by position with the thread's
   stored messages in order, removed ones included (purged rows stay as
   tombstones), system prompts left out (they hold no transcript position).
   A transcript message at the position of a removed message is dropped:
   never stored again, never shown to the model, whatever its text.
   That is how a replayed transcript that still holds purged text cannot bring
   it back, without DeLLM keeping any trace of that text. A message that
   differs from the live one at its position is dropped too (the client edited
   its copy). Messages past the end of the stored thread are stored through
   the one writer (`chat.writer.transcripts_store`), but only when the
   thread's last stored message is live and matched, i.e. the transcript
   verifiably continues this thread. An assistant message there is text
   DeLLM did not write: it derives from everything before it in the thread
   (what the client's model saw), so it is stored only if all of that is
   live, with linear `transcript` edges; otherwise it is dropped (it may
   quote a purged message) and counted in `dropped`, exactly as the import
   skips such a reply. A transcript that matches no thread keeps only its
   last message: its earlier text cannot be told apart from text that was
   forgotten (histories come in through the import instead).
3. **The new turn.** The last message (role `user`) is stored and answered
   through the ordinary turn (chat/turns/start.py), or, when it is a deletion
   request, previewed and never stored (the views do that).

Tool steps hold positions like any message: a reply in which DeLLM's model
called the client's tools (its `tool_calls`, compared with the client's copy
id by id) and each `role: "tool"` result. When the transcript ends with
results (`completion_tool_turn_start`), they answer the calls of the thread's
last message, which must be a live reply of DeLLM's model with those calls
(and the transcript must verifiably continue the thread up to it): they are
stored deriving from that call (`chat.writer.tool_results_store`) and a turn
answers them. Anything else (a call DeLLM did not make, or one that was
forgotten) is refused with a 409 and nothing is stored: results for a
forgotten call are never stored again. A replayed transcript brings no tool
step back: a removed call or result is a removed position, dropped like any.
"""

import logging
from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.contrib.postgres.search import SearchQuery
from django.db import transaction
from django.db.models import QuerySet

from chat.models import INDEX_FIELDS, Message, Thread, Turn
from chat.quotas import chat_transcript_admit
from chat.turns.start import system_message_store, turn_create
from chat.turns.tool_steps import tool_results_turn_create
from chat.writer import Branch, SourcesRemoved, Supplied, transcripts_store
from chat.writer.vectors import messages_index_embed
from core.db.locks import owner_lock
from core.errors import Conflict, NotFound

logger = logging.getLogger(__name__)

# The threads this endpoint opens start untitled: after the first reply the
# worker draws a title from the first user message, recorded with it as its
# source, so a deletion of that message draws it again (chat/titles.py).
THREAD_TITLE = ""
# Candidate threads compared in full when the transcript is the key.
MATCH_CANDIDATES = 8
# Earlier messages tried as anchors at most, from each end of the transcript
# (the newest are the likeliest to be live; each try is one indexed query).
MATCH_ANCHORS = 32


@dataclass(frozen=True)
class ToolCall:
    """One call of an assistant message's `tool_calls`: stored as {"id", "name", "arguments"}."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Said:
    """One non-system message of a client's transcript."""

    role: str
    text: str
    # An assistant message's tool calls; a `tool` result's call id.
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""

    def stored_calls(self) -> list[dict[str, str]] | None:
        """`Message.tool_calls` for this message (None: it called no tool)."""
        return [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls] or None

    def same(self, role: str, content: str, tool_calls: list[dict[str, str]] | None, tool_call_id: str) -> bool:
        """Is this the stored message with these fields (its text, its tool calls, the call it answers)?"""
        return (role, content, tool_calls or None, tool_call_id) == (
            self.role,
            self.text,
            self.stored_calls(),
            self.tool_call_id,
        )


@dataclass
class Alignment:
    """What the earlier messages of a transcript are, against one thread."""

    matched: int = 0
    removed: int = 0
    differing: int = 0
    new: list[Said] = field(default_factory=list)
    dropped_new: int = 0
    # Assistant messages among `new` that were not stored: something before
    # them in the conversation is removed, and they derive from all of it.
    derived_removed: int = 0

    @property
    def stored(self) -> int:
        return len(self.new) - self.derived_removed

    @property
    def dropped(self) -> int:
        return self.removed + self.differing + self.dropped_new + self.derived_removed


@dataclass
class Started:
    thread: Thread
    turn: Turn
    alignment: Alignment
    created_thread: bool


def _positioned(*, owner_id: int, thread_id: int) -> QuerySet[Message]:
    """The thread's messages that hold a transcript position: all but its system prompts and rewrites.

    A rewrite (a regenerated reply, a redacted message) is appended by seq but
    stands in for its original, which the client still holds: the original,
    removed, keeps the position (its copy is dropped), and the client never
    saw the rewrite.
    """
    return (
        Message.objects.filter(owner_id=owner_id, thread_id=thread_id, replaces__isnull=True)
        .exclude(role=Message.Role.SYSTEM)
        .defer(*INDEX_FIELDS)
    )


def transcript_align(*, thread: Thread, earlier: list[Said]) -> Alignment:
    """Align `earlier` by position with the thread's stored messages (removed ones included)."""
    # One past the transcript is all the alignment reads (a longer thread is not continued):
    # a long thread costs no more than the request that names it.
    stored = list(
        _positioned(owner_id=thread.owner_id, thread_id=thread.pk)
        .order_by("seq")
        .values_list("role", "status", "content", "tool_calls", "tool_call_id")[: len(earlier) + 1]
    )
    alignment = Alignment()
    for (role, status, content, calls, call_id), said in zip(stored, earlier, strict=False):
        if status not in Message.LIVE:
            alignment.removed += 1
        elif said.same(role, content, calls, call_id):
            alignment.matched += 1
        else:
            alignment.differing += 1
    extra = earlier[len(stored) :]
    # Extend the thread only from a verified point: its last stored message is
    # live and the transcript holds the same text there. Otherwise what lies
    # beyond could be a shifted copy of something that was forgotten.
    # An empty thread verifies nothing either: a transcript sent into it could
    # hold text forgotten elsewhere.
    continues = (
        bool(stored)
        and len(earlier) >= len(stored)
        and stored[-1][1] in Message.LIVE
        and earlier[len(stored) - 1].same(stored[-1][0], stored[-1][2], stored[-1][3], stored[-1][4])
        and alignment.differing == 0
    )
    if continues:
        alignment.new = extra
    else:
        alignment.dropped_new = len(extra)
    return alignment


def thread_match(*, owner: User, earlier: list[Said]) -> Thread | None:
    """The owner's thread this transcript continues, found by its live messages at their positions.

    Each earlier message is looked up among the owner's live messages with the
    same role and the very same text (the full-text index narrows the search);
    a hit anchors its thread when the hit sits at the same position in it.
    Among anchored threads, the one whose alignment matches the most messages
    wins (ties: the most recently updated). A thread that differs at some
    positions still wins (the client edited its copy, or a turn failed and was
    sent again): those positions are dropped, and the conversation does not
    split into a new thread at every request.
    """
    candidates: dict[int, Thread] = {}
    positions = list(range(len(earlier)))
    anchors = positions[::-1][:MATCH_ANCHORS] + positions[: max(0, min(MATCH_ANCHORS, len(positions) - MATCH_ANCHORS))]
    for position in anchors:
        said = earlier[position]
        if len(candidates) >= MATCH_CANDIDATES:
            break
        hits = Message.objects.filter(
            owner=owner, role=said.role, status__in=Message.LIVE, content=said.text, replaces__isnull=True
        )
        if any(ch.isalnum() for ch in said.text):
            hits = hits.filter(search=SearchQuery(said.text[:2000], config="english", search_type="plain"))
        for hit in hits.order_by("-seq")[:MATCH_CANDIDATES]:
            if hit.thread_id in candidates:
                continue
            if _positioned(owner_id=hit.owner_id, thread_id=hit.thread_id).filter(seq__lt=hit.seq).count() == position:
                candidates[hit.thread_id] = Thread.objects.get(owner=owner, pk=hit.thread_id)
    best: tuple[int, object, Thread] | None = None
    for thread in candidates.values():
        alignment = transcript_align(thread=thread, earlier=earlier)
        rank = (alignment.matched, thread.updated_at, thread)
        if best is None or rank[:2] > best[:2]:
            best = rank
    return None if best is None else best[2]


def thread_for_transcript(*, owner: User, thread_id: int | None, earlier: list[Said]) -> Thread | None:
    """The explicit thread (404 if it is not the owner's), else the matched one, else None."""
    if thread_id is not None:
        thread = Thread.objects.filter(owner=owner, pk=thread_id).first()
        if thread is None:
            raise NotFound(f"No thread with id {thread_id}.", fields={"thread": "not found"})
        return thread
    return thread_match(owner=owner, earlier=earlier) if earlier else None


def completion_turn_start(*, owner: User, thread_id: int | None, conversation: list[Said], system: str = "") -> Started:
    """Store what is new in a client's conversation and a pending turn for its last message.

    The caller enqueues the turn (after subscribing to its events). In one
    transaction: the thread (found or opened); the system prompt if it is new
    to the thread (first, so that it is an ancestor of the client's replies
    stored with it); the earlier messages that extend the thread (an
    assistant one derives from everything before it in the thread, what the
    client's model saw, and is dropped if any of that is removed:
    `chat.writer.transcripts_store`); then the user's message and its turn
    (which records the prompt).
    Nothing is stored for dropped messages; only counts are logged. More new
    earlier messages than DELLM_COMPLETION_MAX_NEW_MESSAGES, or than the
    owner's quotas take, refuse the whole request (`chat.quotas.QuotaExceeded`,
    413 or 429), nothing stored.
    """
    *earlier, last = conversation
    thread = thread_for_transcript(owner=owner, thread_id=thread_id, earlier=earlier)
    created = thread is None
    if thread is None:
        # Unmatched earlier messages cannot be told from forgotten ones: dropped.
        alignment = Alignment(dropped_new=len(earlier))
    else:
        alignment = transcript_align(thread=thread, earlier=earlier)
    stored_ids: list[int] = []
    with transaction.atomic():
        if thread is None:
            thread = Thread.objects.create(owner=owner, title=THREAD_TITLE)
        else:
            # Under the owner's lock nothing is appended to the thread or removed
            # from it until this commits: align again, so that a request racing
            # this one (a double submit) cannot store the extension twice, and a
            # tail forgotten meanwhile stops the extension.
            owner_lock(owner.pk)
            alignment = transcript_align(thread=thread, earlier=earlier)
        # The prompt first: a reply the client's model wrote under it derives from it (it is
        # "before" every new message), so purging the prompt takes that reply too.
        if system.strip():
            system_message_store(thread=thread, text=system)
        if alignment.new:
            # Counted against the per-request cap and the owner's quotas before any is stored (413/429).
            chat_transcript_admit(owner_id=owner.pk, messages=len(alignment.new))
            # The thread as it stands (removed messages included), then what is new: the
            # writer skips an assistant message if anything before it is removed.
            stored = transcripts_store(
                owner_id=owner.pk,
                branches=[
                    Branch(
                        thread_id=thread.pk,
                        items=[
                            *Message.objects.filter(owner_id=thread.owner_id, thread=thread)
                            .order_by("seq")
                            .values_list("pk", flat=True),
                            *(
                                Supplied(
                                    role=said.role,
                                    content=said.text,
                                    tool_calls=said.stored_calls(),
                                    tool_call_id=said.tool_call_id,
                                )
                                for said in alignment.new
                            ),
                        ],
                    )
                ],
            )
            alignment.derived_removed = stored.skipped
            stored_ids = [m.pk for m in stored.created]
        turn = turn_create(thread=thread, content=last.text, enqueue=False, system=system)
    # Outside the lock (it is slow): the new messages' index texts (chat/writer/vectors.py).
    messages_index_embed(owner_id=owner.pk, ids=stored_ids)
    logger.info(
        "completion turn %s in thread %s: %s matched, %s stored, %s dropped (%s removed)",
        turn.pk,
        thread.pk,
        alignment.matched,
        alignment.stored,
        alignment.dropped,
        alignment.removed,
    )
    return Started(thread=thread, turn=turn, alignment=alignment, created_thread=created)


TOOL_CALL_GONE = (
    "These tool results answer no tool call DeLLM holds for this conversation (it was not made here, the "
    "conversation went on, or it was deleted from DeLLM's memory): nothing was stored. Ask again."
)


def completion_tool_turn_start(
    *, owner: User, thread_id: int | None, earlier: list[Said], results: list[Said], system: str = ""
) -> Started:
    """Store a client's tool results for the calls of the thread's last reply, and a pending turn to answer them.

    The transcript must continue the thread up to that reply (it is its last
    positioned message, live, with the very calls the client holds), and the
    reply must be DeLLM's own (a turn's): its turn's question is what the new
    turn answers. The results derive from the call
    (`chat.turns.tool_steps.tool_results_turn_create`). The same results sent again
    (the answer failed and the client retries) are not stored twice: they
    are found at their positions. Anything else is a Conflict (409) and
    nothing is stored.
    """
    thread = thread_for_transcript(owner=owner, thread_id=thread_id, earlier=earlier)
    if thread is None:
        raise Conflict(TOOL_CALL_GONE, code="tool_call_not_found", fields={"messages": "no such tool call"})
    with transaction.atomic():
        owner_lock(owner.pk)
        full = [*earlier, *results]
        # One past the transcript tells a longer thread (which does not fit) from an equal one.
        stored = list(_positioned(owner_id=thread.owner_id, thread_id=thread.pk).order_by("seq")[: len(full) + 1])
        again = len(stored) == len(full) and all(
            m.is_live and said.same(m.role, m.content, m.tool_calls, m.tool_call_id)
            for m, said in zip(stored, full, strict=True)
        )
        alignment = transcript_align(thread=thread, earlier=earlier)
        fits = (len(stored) == len(earlier) and alignment.matched == len(earlier) and not alignment.new) or again
        call = stored[len(earlier) - 1] if fits and earlier else None
        asked = (
            Turn.objects.filter(owner_id=call.owner_id, reply_id=call.pk).first()
            if call is not None and call.tool_calls
            else None
        )
        if call is None or asked is None:
            raise Conflict(TOOL_CALL_GONE, code="tool_call_not_found", fields={"messages": "no such tool call"})
        supplied = (
            []
            if again
            else [Supplied(role=said.role, content=said.text, tool_call_id=said.tool_call_id) for said in results]
        )
        try:
            turn = tool_results_turn_create(
                call=call,
                results=supplied,
                question_id=asked.user_message_id,
                policy=asked.policy,
                system=system,
            )
        except SourcesRemoved:
            raise Conflict(
                TOOL_CALL_GONE, code="tool_call_not_found", fields={"messages": "no such tool call"}
            ) from None
    alignment.matched = len(full) if again else alignment.matched
    logger.info(
        "completion turn %s in thread %s: %s tool results for call %s (%s)",
        turn.pk,
        thread.pk,
        len(results),
        call.pk,
        "already stored" if again else "stored",
    )
    return Started(thread=thread, turn=turn, alignment=alignment, created_thread=False)
