"""Celery tasks of regeneration: run one, sweep the stalled (ids only)."""

import functools
import logging

from celery import Task, shared_task
from django.conf import settings

from core.task_retry import DATABASE_TRANSIENT, database_retry, database_retry_options

logger = logging.getLogger(__name__)


@shared_task(
    name="provenance.regeneration_run", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None
)
def regeneration_run_task(self: Task, *, deletion_id: int, owner_id: int) -> None:
    """Rewrite a deletion's removed replies one at a time, oldest first, as ordinary turns.

    Each runs through `chat.turns.run.turn_run` (same commit path and SSE
    events as any turn). A transient upstream fault retries this task with
    backoff, resuming at the same turn; any other failure fails that turn
    (listed on the deletion, resumable) and the next one runs. acks_late +
    reject_on_worker_lost: a killed worker hands the rest to another.
    """
    from chat.turns.recovery import turn_fail
    from chat.turns.run import turn_run
    from chat.turns.stream import turn_publish
    from core.errors import UpstreamFailed
    from provenance.regeneration.replies import regeneration_next

    while (turn_id := regeneration_next(deletion_id=deletion_id, owner_id=owner_id)) is not None:
        try:
            turn_run(
                turn_id=turn_id,
                owner_id=owner_id,
                on_token=functools.partial(_publish_token, turn_id),
                on_rebuild=functools.partial(turn_publish, turn_id, "reset", {}),
                on_running=functools.partial(turn_publish, turn_id, "status", {"status": "running"}),
            )
        except DATABASE_TRANSIENT as exc:
            # As the turn task does: retried with backoff, resuming at the same turn.
            database_retry(self, exc, what=f"regeneration of deletion {deletion_id}")
        except UpstreamFailed as exc:
            retries = self.request.retries
            if exc.transient and retries < settings.DELLM_LLM_MAX_RETRIES:
                logger.warning(
                    "regeneration turn %s: transient upstream fault (%s), retry %s", turn_id, exc.code, retries + 1
                )
                turn_publish(turn_id, "reset", {})
                raise self.retry(countdown=settings.DELLM_RETRY_BACKOFF * 2**retries) from None
            turn_fail(turn_id=turn_id, owner_id=owner_id, error=exc.message)
        except Exception:
            logger.exception("regeneration turn %s failed unexpectedly", turn_id)
            turn_fail(
                turn_id=turn_id,
                owner_id=owner_id,
                error="Something went wrong while rewriting the reply; resume to retry.",
            )
        finally:
            turn_publish(turn_id, "changed", {})


@shared_task(name="provenance.regenerations_sweep", **database_retry_options())
def regenerations_sweep_task() -> None:
    """Beat: regenerations whose task was lost are run again (replies.regenerations_stalled_sweep)."""
    from chat.turns.stream import turn_publish
    from provenance.models import DeletionRequest
    from provenance.regeneration.replies import regenerations_stalled_sweep

    swept = regenerations_stalled_sweep()
    if swept["resumed"] or swept["failed"]:
        logger.warning(
            "stalled regenerations: resumed deletions %s, failed turns %s", swept["resumed"], swept["failed"]
        )
    for turn_id in swept["failed"]:
        turn_publish(turn_id, "changed", {})
    # A sweep over every owner: the one read here that is not by owner (docs/subsystems/schema.md).
    owners = dict(DeletionRequest.objects.filter(pk__in=swept["resumed"]).values_list("pk", "owner_id"))
    for deletion_id in swept["resumed"]:
        regeneration_run_task.delay(deletion_id=deletion_id, owner_id=owners[deletion_id])


def _publish_token(turn_id: int, token: str) -> None:
    from chat.turns.stream import turn_publish

    turn_publish(turn_id, "token", {"text": token})
