"""A real Celery worker process against the test database and a private queue."""

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import psutil
import pytest
from django.db import connection

from dellm_site.celery import app as celery_app
from dellm_site.celery import worker_command

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    def __init__(self, *, env: dict, concurrency: int, log: Path):
        self.queue = f"dellm-test-{uuid.uuid4().hex[:8]}"
        self.log = log
        db = connection.settings_dict
        environment = {
            **os.environ,
            "DATABASE_URL": f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}",
            "DELLM_CELERY_QUEUE": self.queue,
            **env,
        }
        self.process = subprocess.Popen(
            worker_command(queue=self.queue, concurrency=concurrency),
            cwd=ROOT,
            env=environment,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while " ready." not in log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)

    def children(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children()

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def start_worker(request, django_db_blocker, tmp_path):
    """Start a worker with extra environment; tasks sent by this test go to its queue."""
    workers = []
    previous_queue = celery_app.conf.task_default_queue

    def start(env: dict | None = None, concurrency: int = 2) -> Worker:
        with django_db_blocker.unblock():
            worker = Worker(env=env or {}, concurrency=concurrency, log=tmp_path / f"worker{len(workers)}.log")
        workers.append(worker)
        celery_app.conf.task_default_queue = worker.queue
        return worker

    yield start
    for worker in workers:
        worker.stop()
    celery_app.conf.task_default_queue = previous_queue


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
