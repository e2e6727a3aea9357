"""Celery tasks of turns: run one, sweep the stuck (ids only; the service does the work)."""

import logging

from celery import Task, shared_task
from django.conf import settings

from chat.facts.tasks import facts_extract_soon
from chat.turns.stream import turn_publish
from core.errors import UpstreamFailed
from core.task_retry import DATABASE_TRANSIENT, database_retry, database_retry_options

logger = logging.getLogger(__name__)


@shared_task(name="chat.turn_run", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def turn_run_task(self: Task, *, turn_id: int, owner_id: int) -> None:
    """Generate a turn's reply; transient upstream faults retry with backoff.

    Ids only, like every task (the owner's too: it names the partition that
    holds the turn, docs/ARCHITECTURE.md): a `/v1` client's system prompt is a
    stored message the turn points at (`Turn.system_message`), read by
    `turn_run` from the database.

    acks_late + reject_on_worker_lost: a worker killed mid-turn hands the turn
    to another worker. That is safe because the reply commits atomically and
    only once (the turn leaves pending/running when it commits).
    """
    from chat.titles import turn_thread_untitled
    from chat.turns.recovery import turn_fail
    from chat.turns.run import turn_run
    from chat.turns.tool_offers import turn_tools_drop

    try:
        turn_run(
            turn_id=turn_id,
            owner_id=owner_id,
            on_token=lambda token: turn_publish(turn_id, "token", {"text": token}),
            on_rebuild=lambda: turn_publish(turn_id, "reset", {}),
            on_running=lambda: turn_publish(turn_id, "status", {"status": "running"}),
        )
        # Done or failed for good: a `/v1` client's tools are needed no longer (chat/turns/tool_offers.py).
        turn_tools_drop(turn_id=turn_id)
    except DATABASE_TRANSIENT as exc:
        # The turn cannot even be marked failed now; past its retries the sweep re-runs or fails it.
        database_retry(self, exc, what=f"turn {turn_id}")
    except UpstreamFailed as exc:
        retries = self.request.retries
        if exc.transient and retries < settings.DELLM_LLM_MAX_RETRIES:
            logger.warning("turn %s: transient upstream fault (%s), retry %s", turn_id, exc.code, retries + 1)
            turn_publish(turn_id, "reset", {})
            raise self.retry(countdown=settings.DELLM_RETRY_BACKOFF * 2**retries) from None
        turn_fail(turn_id=turn_id, owner_id=owner_id, error=exc.message)
        turn_tools_drop(turn_id=turn_id)
    except Exception:
        logger.exception("turn %s failed unexpectedly", turn_id)
        turn_fail(
            turn_id=turn_id, owner_id=owner_id, error="Something went wrong while generating the reply; please retry."
        )
        turn_tools_drop(turn_id=turn_id)
        raise
    finally:
        turn_publish(turn_id, "changed", {})
    # After the reply and its "changed", off the turn's path: a thread's first exchange names it (chat/titles.py).
    thread_id = turn_thread_untitled(owner_id=owner_id, turn_id=turn_id)
    if thread_id is not None:
        thread_title_task.delay(owner_id=owner_id, thread_id=thread_id)
    # The user's message, and any a `/v1` transcript brought, are read for facts (chat/facts/), in the worker too.
    facts_extract_soon(owner_id=owner_id)


@shared_task(name="chat.thread_title", **database_retry_options())
def thread_title_task(*, owner_id: int, thread_id: int) -> None:
    """An untitled thread gets a title from its first live user message; a titled one is left as it is."""
    from chat.titles import thread_title_set

    thread_title_set(owner_id=owner_id, thread_id=thread_id)


@shared_task(name="chat.turns_sweep", **database_retry_options())
def turns_sweep_task() -> None:
    """Beat: turns stuck pending/running past DELLM_TURN_STUCK_AFTER are re-run, or failed past their attempts."""
    from chat.turns.recovery import turns_stuck_sweep

    swept = turns_stuck_sweep()
    if swept["rerun"] or swept["failed"]:
        logger.warning("stuck turns: re-ran %s, failed %s", swept["rerun"], swept["failed"])
    for turn_id in swept["failed"]:
        turn_publish(turn_id, "changed", {})
