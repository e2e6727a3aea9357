import os
import sys

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dellm_site.settings")

app = Celery("dellm")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def worker_command(*, queue: str, concurrency: int) -> list[str]:
    """The command line of a worker on one private queue (tests and benchmarks start their own)."""
    return [
        sys.executable, "-m", "celery", "-A", "dellm_site", "worker",
        "--pool", "prefork", "--concurrency", str(concurrency), "-Q", queue,
        "--without-gossip", "--without-mingle", "--loglevel", "INFO",
    ]  # fmt: skip
