"""Per-account ceilings on stored messages: `DELLM_QUOTA_MESSAGES` in all, `DELLM_QUOTA_MESSAGES_PER_DAY` a day.

Counted from sequence numbers, not rows: the writer numbers an owner's
messages 1, 2, 3, ... under the owner's lock (`chat.writer`), one number per
message stored through any door, and a message row is never deleted (a purge
leaves a tombstone), so the highest number is how many messages the account
holds, purged ones included (a purge frees no quota: the tombstone stays).
That is one index lookup on (owner, seq). The messages of the last 24 hours
are a count over at most `DELLM_QUOTA_MESSAGES_PER_DAY` of the newest rows
(past that many, the day's quota is spent whatever the rest are).

Enforced where messages come in bulk, before anything is stored: an import
(when the job is created, then before each conversation lands in the worker:
`ImportAllowance`) and `/v1`'s transcript (`chat_transcript_admit`). Chat
turns count, but are not refused here: the chat throttle and the model's
budget bound them already. The errors are `QuotaExceeded`: 413 when waiting
cannot help (an account that is full, a `/v1` request over its cap), 429
with `Retry-After` when the rolling day's quota is spent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from chat.models import Message
from core.errors import DomainError

DAY = timedelta(days=1)


class QuotaExceeded(DomainError):
    """Refused by a per-account quota; nothing was stored. 413, or 429 with `retry_after` seconds."""

    code = "quota_exceeded"

    def __init__(self, message: str, *, status: int, retry_after: int | None = None) -> None:
        super().__init__(message, fields={"messages": "over quota"})
        self.status = status
        self.retry_after = retry_after


def _top(owner_id: int) -> int:
    return Message.objects.filter(owner_id=owner_id).aggregate(m=Max("seq"))["m"] or 0


def _today(owner_id: int, top: int) -> int:
    """How many of the owner's messages were stored in the last 24 hours."""
    # Only the newest `per_day` numbers matter (one number per message): a
    # count over at most that many rows of the (owner, seq) index.
    per_day = settings.DELLM_QUOTA_MESSAGES_PER_DAY
    return Message.objects.filter(
        owner_id=owner_id, seq__gt=top - per_day, created_at__gte=timezone.now() - DAY
    ).count()


def _wait_s(owner_id: int, top: int, wanted: int) -> int:
    """Seconds until `wanted` more messages fit in the rolling day: when enough of today's have aged out."""
    # Only reached when they do not fit now, so `excess` >= 1.
    per_day = settings.DELLM_QUOTA_MESSAGES_PER_DAY
    now = timezone.now()
    excess = _today(owner_id, top) + wanted - per_day
    window = Message.objects.filter(owner_id=owner_id, seq__gt=top - per_day, created_at__gte=now - DAY)
    oldest = window.order_by("seq").values_list("created_at", flat=True)[excess - 1 : excess].first()
    if oldest is None:
        return 60
    # Whole minutes, rounded up: the delay is a day at most, and a retry at it finds room.
    return max(1, math.ceil((oldest + DAY - now).total_seconds() / 60)) * 60


def _day_full(owner_id: int, top: int, wanted: int, what: str, then: str = "") -> QuotaExceeded:
    wait = _wait_s(owner_id, top, wanted)
    return QuotaExceeded(
        f"{what} would pass this account's quota of {settings.DELLM_QUOTA_MESSAGES_PER_DAY} messages stored in "
        f"24 hours; try again in {wait} s.{then}",
        status=429,
        retry_after=wait,
    )


def _total_full(top: int, what: str, then: str = "") -> QuotaExceeded:
    return QuotaExceeded(
        f"{what} would pass this account's quota of {settings.DELLM_QUOTA_MESSAGES} messages in all "
        f"(it holds {top}, purged ones included).{then}",
        status=413,
    )


def import_admit(*, owner_id: int) -> None:
    """Refuse an upload before its job exists: 413 if the account is full, 429 if today's quota is spent.

    The request does not read the file's count (it only sniffs the file), and
    some of its messages may be stored already (the import is idempotent): the
    worker lands whole conversations while they fit (`ImportAllowance`).
    """
    per_day = settings.DELLM_QUOTA_MESSAGES_PER_DAY
    top = _top(owner_id)
    if top >= settings.DELLM_QUOTA_MESSAGES:
        raise _total_full(top, "Importing")
    if _today(owner_id, top) >= per_day:
        raise _day_full(owner_id, top, 1, "Importing")


@dataclass
class ImportAllowance:
    """What an import job may still store, read once when it starts and kept current from sequence numbers.

    `take` is called under the owner's lock before each conversation lands:
    every message stored since the start, by this job or any other door, has
    taken a sequence number, so the allowance is the one at the start minus
    how far the owner's highest number has moved (one index lookup, not a
    day's count per conversation). The day window moving on during the job
    only frees quota, so ignoring that is on the safe side.
    """

    owner_id: int
    top: int
    left: int
    refused: QuotaExceeded | None = None

    @classmethod
    def start(cls, *, owner_id: int) -> ImportAllowance:
        top = _top(owner_id)
        left = min(
            settings.DELLM_QUOTA_MESSAGES - top,
            settings.DELLM_QUOTA_MESSAGES_PER_DAY - _today(owner_id, top),
        )
        return cls(owner_id=owner_id, top=top, left=max(left, 0))

    def take(self, count: int) -> None:
        """Refuse (QuotaExceeded) `count` new messages that no longer fit; once refused, refuse every later one.

        So an import lands a prefix of its conversations, each whole, and
        importing the file again later adds exactly the rest.
        """
        if self.refused is not None:
            raise self.refused
        top = _top(self.owner_id)
        if count <= self.left - (top - self.top):
            return
        per_day = settings.DELLM_QUOTA_MESSAGES_PER_DAY
        if count > per_day:
            self.refused = QuotaExceeded(
                f"This conversation holds {count} new messages; at most {per_day} can be stored in 24 hours.",
                status=413,
            )
        elif top + count > settings.DELLM_QUOTA_MESSAGES:
            self.refused = _total_full(top, "Importing this conversation")
        else:
            then = " Import the file again then: what landed is not imported twice."
            self.refused = _day_full(self.owner_id, top, count, "Importing this conversation", then)
        raise self.refused


def chat_transcript_admit(*, owner_id: int, messages: int) -> None:
    """Refuse a `/v1` transcript's `messages` new ones before any is stored; call under the owner's lock.

    413 past `DELLM_COMPLETION_MAX_NEW_MESSAGES` per request (histories come
    in through the import) or past the account's total; 429 with
    `Retry-After` past the rolling day's quota.
    """
    limit = settings.DELLM_COMPLETION_MAX_NEW_MESSAGES
    if messages > limit:
        raise QuotaExceeded(
            f"The transcript holds {messages} messages this thread does not have; at most {limit} are stored "
            "per request. Bring a whole history in through the import.",
            status=413,
        )
    top = _top(owner_id)
    if top + messages > settings.DELLM_QUOTA_MESSAGES:
        raise _total_full(top, "Storing the transcript")
    if _today(owner_id, top) + messages > settings.DELLM_QUOTA_MESSAGES_PER_DAY:
        raise _day_full(owner_id, top, messages, "Storing the transcript")
