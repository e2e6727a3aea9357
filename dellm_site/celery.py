import os
import sys

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dellm_site.settings")

app = Celery("dellm")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _worker_pool_size(**kwargs: object) -> None:
    """A worker child runs one task at a time: its database pool is DELLM_WORKER_DB_POOL_MAX, not the web's."""
    from django.conf import settings

    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
    if isinstance(pool, dict):
        pool["max_size"] = settings.DELLM_WORKER_DB_POOL_MAX
        pool["min_size"] = min(pool.get("min_size", 0), settings.DELLM_WORKER_DB_POOL_MAX)


def worker_command(*, queue: str, concurrency: int) -> list[str]:
    """The command line of a worker on one private queue (tests and benchmarks start their own)."""
    return [
        sys.executable, "-m", "celery", "-A", "dellm_site", "worker",
        "--pool", "prefork", "--concurrency", str(concurrency), "-Q", queue,
        "--without-gossip", "--without-mingle", "--loglevel", "INFO",
    ]  # fmt: skip
