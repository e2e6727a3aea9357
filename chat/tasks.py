"""Celery tasks for chat turns: ids in, nothing out (results are ignored)."""

import logging

from celery import shared_task

from chat import services
from dellm_site.errors import UpstreamFailed

logger = logging.getLogger(__name__)

# Backoff for transient LLM/embedding faults: 2, 4, 8, 16, 32 s, then give up.
MAX_RETRIES = 5


@shared_task(name="chat.turn_run", bind=True, acks_late=True, max_retries=MAX_RETRIES)
def turn_run(self, *, turn_id: int) -> None:
    try:
        services.turn_run(turn_id=turn_id)
    except UpstreamFailed as exc:
        if exc.transient and self.request.retries < MAX_RETRIES:
            logger.warning("turn %s: transient upstream fault, retry %s", turn_id, self.request.retries + 1)
            raise self.retry(countdown=2 ** (self.request.retries + 1), exc=None) from None
        services.turn_fail(turn_id=turn_id, error=exc.message)
