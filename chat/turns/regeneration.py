"""Turns that regenerate a derived reply after a deletion (provenance/regeneration/ drives them)."""

from django.utils import timezone

from chat.models import Message, Turn


def regeneration_turns_create(*, owner_id: int, deletion_id: int, rewrites: list[tuple[int, int, str]]) -> list[int]:
    """Pending turns that rewrite replies: `rewrites` is [(old reply id, user message id, policy)].

    Called inside the deletion's transaction, under the owner's lock; nothing is
    enqueued here (the deletion runs its regenerations in order). Each is an
    ordinary turn: same commit path, events, failure and retry. A rewrite keeps
    the system prompt its reply was written under while that prompt is live
    (read after the deletion's status changes, so a removed prompt is dropped).
    """
    prompts = dict(
        Turn.objects.filter(
            owner_id=owner_id,
            reply_id__in=[reply_id for reply_id, _, _ in rewrites],
            system_message__owner_id=owner_id,
            system_message__status__in=Message.LIVE,
        ).values_list("reply_id", "system_message_id")
    )
    turns = Turn.objects.bulk_create(
        Turn(
            owner_id=owner_id,
            user_message_id=user_id,
            policy=policy,
            replaces=reply_id,
            deletion_id=deletion_id,
            system_message_id=prompts.get(reply_id),
        )
        for reply_id, user_id, policy in rewrites
    )
    return [turn.pk for turn in turns]


def regeneration_turns_close(*, owner_id: int, deletion_id: int, error: str) -> int:
    """Fail the deletion's regeneration turns that have not committed; how many. Caller holds the owner's lock."""
    return Turn.objects.filter(
        owner_id=owner_id, deletion_id=deletion_id, status__in=[Turn.Status.PENDING, Turn.Status.RUNNING]
    ).update(status=Turn.Status.FAILED, error=error, updated_at=timezone.now())
