"""Transient database errors in Celery tasks: retried with backoff, then left to the sweep.

A connection lost mid-task, a server out of connection slots (SQLSTATE 53300)
or a pool that stayed busy are worth another try a little later; every
DeLLM task is safe to run twice (conditional UPDATEs, the owner's lock).
"""

import logging
import random
from typing import Any, NoReturn

from celery import Task
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from core.overload import sqlstate

logger = logging.getLogger(__name__)

DATABASE_TRANSIENT = (OperationalError, InterfaceError)


def database_retry_options() -> dict[str, Any]:
    """`shared_task(**...)` options: Celery's own autoretry with exponential, jittered backoff."""
    return {
        "autoretry_for": DATABASE_TRANSIENT,
        "retry_backoff": max(1, round(settings.DELLM_DB_RETRY_BACKOFF)),
        "retry_backoff_max": 60,
        "retry_jitter": True,
        "max_retries": settings.DELLM_DB_MAX_RETRIES,
    }


def database_retry(task: Task, exc: Exception, *, what: str) -> NoReturn:
    """Retry `task` after a transient database error, or re-raise once its retries are spent.

    For tasks that handle other errors themselves (the turn task); the others
    use `database_retry_options()`. The broken connection is dropped first, so
    the next attempt starts on a fresh one.
    """
    retries = task.request.retries
    code = sqlstate(exc) or "none"
    if not connection.in_atomic_block:
        connection.close()
    if retries >= settings.DELLM_DB_MAX_RETRIES:
        logger.error("%s: database error %s sqlstate=%s, retries spent", what, type(exc).__name__, code)
        raise exc
    countdown = min(60.0, settings.DELLM_DB_RETRY_BACKOFF * 2**retries) * random.uniform(0.5, 1.0)
    logger.warning("%s: database error %s sqlstate=%s, retry %s", what, type(exc).__name__, code, retries + 1)
    raise task.retry(countdown=countdown, max_retries=settings.DELLM_DB_MAX_RETRIES) from None
