import os
import sys

from celery import Celery
from celery.signals import task_prerun, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dellm_site.settings")

app = Celery("dellm")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each subsystem folder keeps its tasks in its own `tasks.py` (docs/ARCHITECTURE.md, "Layout").
TASK_PACKAGES = [
    "chat.turns",
    "chat.index",
    "chat.imports",
    "chat.facts",
    "provenance.deletions",
    "provenance.erasure",
    "provenance.regeneration",
]
app.autodiscover_tasks(TASK_PACKAGES)


@worker_process_init.connect
def _worker_pool_size(**kwargs: object) -> None:
    """A worker child runs one task at a time: its database pool is DELLM_WORKER_DB_POOL_MAX, not the web's."""
    from django.conf import settings

    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        pool["max_size"] = settings.DELLM_WORKER_DB_POOL_MAX
        pool["min_size"] = min(pool.get("min_size", 0), settings.DELLM_WORKER_DB_POOL_MAX)


@worker_process_init.connect
def _embedder_preload(**kwargs: object) -> None:
    """A worker child loads an in-process embedder before its first task, as the web process does."""
    from chat.index.embeddings import embedder_preload

    embedder_preload()


@task_prerun.connect
def _debug_queries_reset(**kwargs: object) -> None:
    """A task is the worker's request: with DEBUG (`make run`) Django logs every query of a connection until
    `request_started` clears it, which no task sends, so each child kept its last 9,000 queries (SQL with vector
    literals: its memory grew by 6 MB a minute in `dellm_bench --parts soak`). Without DEBUG there is no log
    to clear, and a test's query capture (which forces one) keeps what it counts."""
    from django.conf import settings
    from django.db import reset_queries

    if settings.DEBUG:
        reset_queries()


def worker_command(*, queue: str, concurrency: int) -> list[str]:
    """The command line of a worker on one private queue (tests and benchmarks start their own)."""
    return [
        sys.executable, "-m", "celery", "-A", "dellm_site", "worker",
        "--pool", "prefork", "--concurrency", str(concurrency), "-Q", queue,
        "--without-gossip", "--without-mingle", "--loglevel", "INFO",
    ]  # fmt: skip
