"""Celery tasks of facts: draw them from new messages, re-derive them after a deletion (ids only)."""

import logging

from celery import Task, shared_task
from django.conf import settings

from core.task_retry import database_retry_options

logger = logging.getLogger(__name__)


@shared_task(name="chat.facts_extract", bind=True, **database_retry_options())
def facts_extract_task(self: Task, *, owner_id: int) -> None:
    """One extraction pass over the owner's next messages; the next pass is enqueued while some are left.

    A pass that waits for the owner's model budget is not run again in-process (an eager run has no timer).
    """
    from chat.facts.extract import facts_extract_pass

    done = facts_extract_pass(owner_id=owner_id)
    logger.info("facts of user %s: read %s, stored %s, failed %s", owner_id, done.read, done.stored, done.failed)
    if done.more and not (done.wait and self.request.is_eager):
        facts_extract_task.apply_async(kwargs={"owner_id": owner_id}, countdown=done.wait or 0)


@shared_task(name="chat.facts_rederive", bind=True, **database_retry_options())
def facts_rederive_task(self: Task, *, owner_id: int, fact_ids: list[int]) -> None:
    """Re-derive the facts a deletion removed from their surviving sources (`chat.facts.rederive`)."""
    from chat.facts.rederive import BudgetSpent, facts_rederive

    try:
        stored = facts_rederive(owner_id=owner_id, fact_ids=fact_ids)
    except BudgetSpent as spent:
        # The rest waits for the owner's model budget; what is done is not done again.
        if not self.request.is_eager:
            facts_rederive_task.apply_async(
                kwargs={"owner_id": owner_id, "fact_ids": fact_ids}, countdown=spent.wait or 60
            )
        return
    logger.info("facts of user %s: %s re-derived of %s removed", owner_id, len(stored), len(fact_ids))


def facts_extract_soon(*, owner_id: int) -> None:
    """Enqueue an extraction pass for the owner when facts are on (DELLM_FACTS)."""
    if settings.DELLM_FACTS:
        facts_extract_task.delay(owner_id=owner_id)
