"""A deletion's preview: what a selection takes, Dep(m), and what it would do (docs/subsystems/deletions.md)."""

import logging
import math
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models.functions import Length
from django.utils import timezone
from pgvector.django import CosineDistance

from chat.index.embeddings import embed_one
from chat.models import LIVE_STATUSES, Message
from core.api.budgets import budget_take
from core.errors import NotFound, Throttled, ValidationFailed
from core.types import User
from provenance.deletions.by_identifier import IdentifierMatch, identifier_select
from provenance.deletions.by_words import SUBJECT_WORDS, WordsMatch, is_statement, negated, subject_select, words_select
from provenance.deletions.redaction import Matcher, redact_with_model, redaction_uses_model
from provenance.dependents import dep_ids, explanation_paths
from provenance.models import DeletionRequest
from provenance.regeneration.replies import regeneration_plan

logger = logging.getLogger(__name__)

Mode = DeletionRequest.Mode
Status = DeletionRequest.Status
Derived = DeletionRequest.Derived
MAX_SELECT_IDS = 10_000
# A `words` selection is a name or a short phrase, matched as whole words in every candidate.
MAX_WORDS = 10
MAX_WORDS_CHARS = 200


def validate_derived(derived: object) -> str:
    if derived is None:
        return Derived.DELETE
    if derived not in Derived.values:
        raise ValidationFailed(
            f"Unknown choice for derived replies {derived!r}; use delete or regenerate.", fields={"derived": "unknown"}
        )
    return derived


def _validate_mode(mode: str) -> str:
    if mode not in Mode.values:
        raise ValidationFailed(
            f"Unknown deletion mode {mode!r}; use soft, purge or expire.", fields={"mode": "unknown"}
        )
    return mode


def _validate_depth(depth: int | None) -> int | None:
    if depth is None:
        return None
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValidationFailed("depth must be a whole number >= 0.", fields={"depth": "invalid"})
    return depth


def _validate_expire_at(mode: str, expire_at: datetime | None) -> datetime | None:
    if mode != Mode.EXPIRE:
        if expire_at is not None:
            raise ValidationFailed("expire_at is only for mode 'expire'.", fields={"expire_at": "unexpected"})
        return None
    if not isinstance(expire_at, datetime) or timezone.is_naive(expire_at):
        raise ValidationFailed(
            "mode 'expire' needs expire_at, a date and time with a time zone.", fields={"expire_at": "required"}
        )
    if expire_at <= timezone.now():
        raise ValidationFailed("expire_at must be in the future.", fields={"expire_at": "in the past"})
    return expire_at


def _validate_threshold(threshold: float | None) -> float:
    if threshold is None:
        return settings.DELLM_SEMANTIC_THRESHOLD
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValidationFailed("threshold must be a number.", fields={"threshold": "invalid"})
    if not -1.0 <= threshold <= 1.0:
        raise ValidationFailed("threshold must be between -1 and 1.", fields={"threshold": "out of range"})
    return float(threshold)


def _select_ids(*, owner: User, ids: list[int] | None) -> list[int]:
    if not isinstance(ids, (list, tuple)) or not ids:
        raise ValidationFailed("ids must be a non-empty list of message ids.", fields={"ids": "invalid"})
    if len(ids) > MAX_SELECT_IDS:
        raise ValidationFailed(f"At most {MAX_SELECT_IDS} ids at once.", fields={"ids": "too many"})
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise ValidationFailed("ids must be whole numbers.", fields={"ids": "invalid"})
    wanted = set(ids)
    found = set(Message.objects.filter(owner=owner, pk__in=wanted).values_list("pk", flat=True))
    missing = wanted - found
    if missing:
        # Another owner's id is reported exactly like one that does not exist.
        raise NotFound(f"No message with id {min(missing)}.")
    return sorted(found)


def _selectable(mode: str, *, by_owner: bool) -> list[str]:
    # A purge by the owner also reaches soft-deleted messages: the user wants the text gone.
    # Staff select by words or meaning among live messages only: a match on a removed one
    # would tell them what it said (they reach removed messages by id).
    statuses = list(LIVE_STATUSES)
    if mode == Mode.PURGE and by_owner:
        statuses.append(Message.Status.DELETED)
    return statuses


def _select_exact(*, owner: User, phrase: str | None, mode: str, by_owner: bool) -> list[int]:
    if not isinstance(phrase, str) or not phrase.strip():
        raise ValidationFailed("The phrase to delete is empty.", fields={"exact": "empty"})
    if len(phrase) > settings.DELLM_MAX_MESSAGE_CHARS:
        raise ValidationFailed("The phrase is too long.", fields={"exact": "too long"})
    matches = Message.objects.filter(
        owner=owner, status__in=_selectable(mode, by_owner=by_owner), content__icontains=phrase.strip()
    )
    return sorted(matches.values_list("pk", flat=True))


def _select_words(*, owner: User, words: str | None, subject: str | None, statuses: list[str]) -> WordsMatch:
    if words is not None:
        if not isinstance(words, str) or not any(ch.isalnum() for ch in words):
            raise ValidationFailed("The words to delete are empty.", fields={"words": "empty"})
        if len(words) > MAX_WORDS_CHARS or len(words.split()) > MAX_WORDS:
            raise ValidationFailed(
                f"Words are a name or a phrase: at most {MAX_WORDS} words, {MAX_WORDS_CHARS} characters.",
                fields={"words": "too long"},
            )
        return words_select(owner=owner, phrase=" ".join(words.split()), statuses=statuses)
    if subject not in SUBJECT_WORDS:
        raise ValidationFailed(f"subject is one of {', '.join(sorted(SUBJECT_WORDS))}.", fields={"subject": "unknown"})
    return subject_select(owner=owner, subject=str(subject), statuses=statuses)


def _select_semantic(*, owner: User, query: str | None, threshold: float, mode: str, by_owner: bool) -> list[int]:
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailed("The text to match is empty.", fields={"semantic": "empty"})
    if len(query) > settings.DELLM_MAX_MESSAGE_CHARS:
        raise ValidationFailed("The text to match is too long.", fields={"semantic": "too long"})
    vector = embed_one(query)
    # Only vectors of the configured model are comparable with the query's
    # (during a `reembed` switch the others are left out, as in retrieval).
    matches = (
        Message.objects.filter(
            owner=owner,
            status__in=_selectable(mode, by_owner=by_owner),
            embedding__isnull=False,
            embedding_model=settings.DELLM_EMBEDDING_MODEL,
        )
        .alias(distance=CosineDistance("embedding", vector))
        .filter(distance__lte=1 - threshold)
    )
    if not is_statement(query):
        return sorted(matches.values_list("pk", flat=True))
    # A statement's negation is its opposite, however near in meaning: only the same polarity is taken.
    wanted = negated(query)
    return sorted(pk for pk, content in matches.values_list("pk", "content") if negated(content) == wanted)


def deletion_preview(
    *,
    owner: User,
    actor: User,
    mode: str,
    ids: list[int] | None = None,
    exact: str | None = None,
    semantic: str | None = None,
    identifier: str | None = None,
    words: str | None = None,
    subject: str | None = None,
    threshold: float | None = None,
    depth: int | None = None,
    expire_at: datetime | None = None,
    selector: str | None = None,
    derived: str | None = None,
    offer_redactions: bool = True,
    removed_by_words: bool | None = None,
) -> DeletionRequest:
    """Select M, compute Dep(M) and explanation paths; change no message.

    Exactly one of `ids`, `exact`, `semantic`, `identifier`, `words`, `subject` selects (`identifier`: a
    text naming e-mail addresses, numbers, keys..., each matched as that identifier, never a neighbour:
    provenance/deletions/by_identifier.py, whose `resolution`, not stored, says what was named and which
    near misses were kept; `words` and `subject`: provenance/deletions/by_words.py). `selector="request"`
    records that a natural-language request was resolved to that selection.
    `derived` says what happens to the replies in Dep(M) \\ M: `delete` (the
    default) or `regenerate`; `regenerate_ids` lists the replies a regeneration
    would rewrite (one model call each), whichever was chosen.
    Side effect: one audit row in status `previewed`. The selection's text is
    used and dropped; it is not stored. An exact or semantic selection also
    gets `redaction_proposals` (not stored): for each matched user message
    whose matched words sit in part of it, that message without them, within
    the preview's caps (`redactions_unscanned` lists the messages past them).
    With a model configured those are model calls charged to the owner's chat
    budget: Throttled (429), and no audit row, when the budget is spent.
    A caller that shows no redaction (a `/v1` answer, a staff request) passes
    `offer_redactions=False` and spends nothing on them.
    """
    # Words or meaning reach soft-deleted messages for a purge only when the owner asks in person
    # (`removed_by_words`, default: the actor is the owner): staff and agents would learn what they say.
    by_owner = actor.pk == owner.pk if removed_by_words is None else removed_by_words
    _validate_mode(mode)
    derived = validate_derived(derived)
    depth = _validate_depth(depth)
    expire_at = _validate_expire_at(mode, expire_at)
    selectors = (
        ("ids", ids),
        ("exact", exact),
        ("semantic", semantic),
        ("identifier", identifier),
        ("words", words),
        ("subject", subject),
    )
    given = [name for name, value in selectors if value is not None]
    if len(given) != 1:
        raise ValidationFailed(
            "Select messages with exactly one of ids, exact, semantic, identifier, words or subject.",
            fields={"select": "one selector"},
        )
    kind = given[0]
    if kind != "semantic" and threshold is not None:
        raise ValidationFailed("threshold goes with a semantic selection.", fields={"threshold": "unexpected"})
    by_id: IdentifierMatch | None = None
    # {message id: (kind, text)}: how each matched message is redacted, where the selection says it per message.
    phrases: dict[int, tuple[str, str]] | None = None
    if kind == "ids":
        matched = _select_ids(owner=owner, ids=ids)
    elif kind == "identifier":
        by_id = identifier_select(owner=owner, text=identifier, statuses=_selectable(mode, by_owner=by_owner))
        matched, phrases = by_id.matched, {pk: ("exact", text) for pk, text in by_id.written.items()}
    elif kind in ("words", "subject"):
        by_words = _select_words(
            owner=owner, words=words, subject=subject, statuses=_selectable(mode, by_owner=by_owner)
        )
        matched, phrases = by_words.matched, by_words.phrases
    elif kind == "exact":
        matched = _select_exact(owner=owner, phrase=exact, mode=mode, by_owner=by_owner)
    else:
        threshold = _validate_threshold(threshold)
        matched = _select_semantic(owner=owner, query=semantic, threshold=threshold, mode=mode, by_owner=by_owner)
    members = dep_ids(owner_id=owner.pk, roots=matched, depth=depth)
    paths = explanation_paths(owner_id=owner.pk, roots=matched, depth=depth)
    live_members = set(
        Message.objects.filter(owner=owner, pk__in=members, status__in=Message.LIVE).values_list("pk", flat=True)
    )
    plan = regeneration_plan(
        owner_id=owner.pk, removed=live_members, matched=set(matched), redacted={}, rewrite_matched=kind != "ids"
    )
    # Before the audit row: a preview refused for the chat budget changes nothing.
    proposals, unscanned = (
        _redaction_proposals(owner=owner, matched=matched, exact=exact, semantic=semantic, phrases=phrases)
        if offer_redactions and kind != "ids" and mode != Mode.EXPIRE
        else ([], [])
    )
    deletion = DeletionRequest.objects.create(
        owner=owner,
        actor=actor,
        selector=selector or kind,
        resolved_selector=kind,
        threshold=threshold if kind == "semantic" else None,
        mode=mode,
        depth=depth,
        expire_at=expire_at,
        derived=derived,
        regenerate_ids=[reply for reply, _, _ in plan],
        matched_ids=matched,
        dependent_ids=sorted(members - set(matched)),
        explanations={str(node): path for node, path in sorted(paths.items())},
    )
    if by_id is not None:
        # A redaction that still holds the identifier (written twice, or another way) is no redaction.
        proposals = [p for p in proposals if not by_id.held_after(p["text"])]
    deletion.redaction_proposals = tuple(proposals)
    deletion.redactions_unscanned = tuple(unscanned)
    deletion.resolution = by_id.resolution() if by_id else None
    logger.info("deletion %s previewed: %s matched, %s dependents", deletion.pk, len(matched), len(paths))
    return deletion


def _redaction_proposals(
    *,
    owner: User,
    matched: list[int],
    exact: str | None,
    semantic: str | None,
    phrases: dict[int, tuple[str, str]] | None,
) -> tuple[list[dict[str, Any]], list[int]]:
    """The redactions on offer, [{"message", "text", "regenerate"}], and the ids of the messages left unscanned.

    Bounded work, all of it in the request: the matched live user messages are
    scanned oldest first while they fit in DELLM_REDACTION_MAX_MESSAGES and
    DELLM_REDACTION_MAX_CHARS (the rest are unscanned: the preview says so, and
    the confirm deletes them whole unless the user sends a text for them); the
    query is prepared once, and each scan is linear in its message. With a
    model configured, each message the rules can redact is one model call,
    taken from the owner's chat budget (the counter of turns and /v1) before
    any is made; the rules' text stands for those the budget cannot cover, and
    a preview that needs one and finds the budget spent is refused (429).
    """
    candidates = (
        Message.objects.filter(owner=owner, pk__in=matched, role=Message.Role.USER, status__in=Message.LIVE)
        .order_by("seq")
        .values_list("pk", Length("content"))
    )
    most_messages, most_chars = settings.DELLM_REDACTION_MAX_MESSAGES, settings.DELLM_REDACTION_MAX_CHARS
    scanned: list[int] = []
    unscanned: list[int] = []
    chars = 0
    for pk, length in candidates:
        # The first message past a cap ends the scan: the scanned ones stay the oldest.
        if not unscanned and len(scanned) < most_messages and chars + length <= most_chars:
            scanned.append(pk)
            chars += length
        else:
            unscanned.append(pk)
    matcher = Matcher(exact=exact, semantic=semantic)
    contents = dict(Message.objects.filter(owner=owner, pk__in=scanned).values_list("pk", "content"))

    def redacted(pk: int) -> str | None:
        # A selection that says, per message, what in it was matched (an identifier as written there, a
        # subject's words): that is what goes.
        if phrases is None:
            return matcher.redact(contents[pk])
        if pk not in phrases:
            return None
        how, text = phrases[pk]
        return Matcher(**{how: text}).redact(contents[pk])

    by_rules = [(pk, text) for pk in scanned if (text := redacted(pk)) is not None]
    texts = dict(by_rules)
    if by_rules and redaction_uses_model():
        taken, wait = budget_take(user_id=owner.pk, scope="chat", wanted=len(by_rules))
        if not taken:
            raise Throttled(
                "The model writes this preview's redactions, one call each from your chat budget, "
                "and that budget is spent; try again shortly.",
                retry_after=wait,
            )
        for pk, _ in by_rules[:taken]:
            topic = phrases[pk][1] if phrases is not None else exact if exact is not None else semantic or ""
            texts[pk] = redact_with_model(text=contents[pk], topic=topic) or texts[pk]
        logger.info("redaction preview for owner %s: %s model calls charged", owner.pk, taken)
    proposals = []
    for pk, _ in by_rules:
        members = dep_ids(owner_id=owner.pk, roots=[pk])
        plan = regeneration_plan(
            owner_id=owner.pk, removed=members, matched=set(matched), redacted={pk: None}, rewrite_matched=True
        )
        proposals.append({"message": pk, "text": texts[pk], "regenerate": [reply for reply, _, _ in plan]})
    return proposals, unscanned
