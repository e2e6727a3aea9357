"""Helpers shared by the suite (fixtures live in tests/conftest.py only).

API clients, waiting, a real Celery worker process, and the places where
purged text could linger, read as plain text: a pg_dump of the database and
every Redis key.
"""

import asyncio
import base64
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import redis
from django.conf import settings
from django.db import connection
from pgserver._commands import POSTGRES_BIN_PATH
from rest_framework.test import APIClient

from chat.models import ContextEdge
from core.auth.tokens import token_create
from dellm_site.celery import worker_command

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user)[1]}")
    return client


def run_async(function, *args):
    """Run an async callable to completion on a fresh event loop in its own thread.

    Not `async_to_sync` in the test's thread: once a browser test has started
    Playwright's sync API (a session fixture), an event loop runs in the main
    thread, and `async_to_sync` refuses to run there.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, function(*args)).result()


@contextlib.contextmanager
def outside_the_browsers_loop():
    """The sync test client calling an async view (/v1) after a browser test in this process.

    Between its calls Playwright's sync API (the session's `chromium`) keeps its event loop marked as
    running in this thread (its suspended loop needs the mark when it resumes), and `async_to_sync`
    refuses to run there. The mark is lifted for the block and put back after. The async view then runs
    on a thread of its own, with a connection of its own: the test must be transactional.
    """
    loop = asyncio._get_running_loop()
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(loop)


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


class Worker:
    def __init__(self, *, env: dict, concurrency: int, log: Path):
        self.queue = env.get("DELLM_CELERY_QUEUE") or f"dellm-test-{uuid.uuid4().hex[:8]}"
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


def pg_dump() -> str:
    db = connection.settings_dict
    command = [str(POSTGRES_BIN_PATH / "pg_dump"), "--no-owner", "-d", db["NAME"], "-U", db["USER"] or "postgres"]
    if db["HOST"]:
        command += ["-h", db["HOST"]]
    if db["PORT"]:
        command += ["-p", str(db["PORT"])]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout


def cache_clear() -> None:
    """Empties this instance's part of the shared Redis cache (FLUSHDB would empty everyone's)."""
    from django.core.cache import cache

    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = list(client.scan_iter(match=f"{cache.key_prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


def _siblings_key(key: bytes) -> bool:
    """A key of another process of this parallel suite (tests/settings.py): another instance's, not ours."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    ours = settings.DELLM_REDIS_PREFIX.encode()
    suite = ours.rsplit(b"-", 1)[0] + b"-"
    return key.startswith(suite) and not key.startswith(ours + b":")


def redis_dump() -> str:
    """Every key and value in the Redis database Celery uses, as text (but a parallel suite process's own)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    parts = []
    for key in client.scan_iter(count=1000):
        if _siblings_key(key):
            continue
        kind = client.type(key).decode()
        if kind == "string":
            value = client.get(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        else:
            value = client.xrange(key) if kind == "stream" else b""
        parts.append(f"{key!r}={value!r}")
    text = "\n".join(parts)
    # Task bodies are base64 in the queue: decode what can be decoded.
    for token in text.split("'"):
        with contextlib.suppress(ValueError):
            text += base64.b64decode(token, validate=True).decode("utf-8", "ignore")
    return text


# --- uvicorn serving dellm_site.asgi against the test database, as `make run` and production serve it ---


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_database_url() -> str:
    db = connection.settings_dict
    return f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}"


class AsgiServer:
    """uvicorn serving `dellm_site.asgi:application` on the test database, as in production (fixture `asgi_server`).

    The one uvicorn helper of the suite. A process of its own: its environment
    (pool sizes, stream caps, the worker's queue) is the test's to set, its
    threads can be counted, and uvicorn's logging setup never touches the
    test process's filtered logging (core/logs.py).
    """

    def __init__(self, *, env: dict[str, str], log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "uvicorn", "dellm_site.asgi:application",
                "--host", "127.0.0.1", "--port", str(self.port), "--no-access-log", "--log-level", "warning",
            ],
            cwd=ROOT,
            env={
                **os.environ,
                "DATABASE_URL": test_database_url(),
                "DJANGO_DEBUG": "true",
                "DELLM_SSE_TIMEOUT": "30",
                **env,
            },
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"uvicorn did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def threads(self) -> int:
        return psutil.Process(self.process.pid).num_threads()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


# --- Relation files, as PostgreSQL wrote them (the erasure registry's residue tests) ---

PAGE = 8192


def indexes_of(tables: list[str]) -> set[str]:
    """The indexes of these tables and, on a table partitioned by owner, the partitions' own (a per-owner index)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.relname FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid "
            "JOIN pg_class i ON i.oid = x.indexrelid LEFT JOIN pg_inherits p ON p.inhrelid = t.oid "
            "WHERE (t.relname = ANY(%(tables)s) "
            "OR p.inhparent IN (SELECT oid FROM pg_class WHERE relname = ANY(%(tables)s))) "
            "AND NOT EXISTS (SELECT FROM pg_inherits a WHERE a.inhrelid = x.indexrelid)",
            {"tables": tables},
        )
        return {name for (name,) in cursor.fetchall()}


def relation_files(relations: list[str]) -> dict[str, bytes]:
    """{relation: every byte of its main fork} after a CHECKPOINT, a table's TOAST table listed as `<table>:toast`.

    A partitioned table or index has no file of its own: its partitions' files (and their TOAST), one after
    the other, are listed under its name.
    """
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
        cursor.execute(
            "SELECT COALESCE(p.relname, c.relname), current_setting('data_directory'), pg_relation_filepath(c.oid), "
            "pg_relation_filepath(NULLIF(c.reltoastrelid, 0)) FROM pg_class c "
            "LEFT JOIN pg_inherits i ON i.inhrelid = c.oid "
            "LEFT JOIN pg_class p ON p.oid = i.inhparent AND p.relkind IN ('p', 'I') "
            "WHERE c.relname = ANY(%(names)s) OR p.relname = ANY(%(names)s) ORDER BY c.relname",
            {"names": relations},
        )
        rows = cursor.fetchall()
    found: dict[str, bytes] = {}
    for name, root, main, toast in rows:
        for key, relative in ((name, main), (f"{name}:toast", toast)):
            if relative is not None:
                path = Path(root) / relative
                # A relation past 1 GB continues in segments .1, .2, ...
                segments = [path, *sorted(path.parent.glob(f"{path.name}.*"))]
                found[key] = found.get(key, b"") + b"".join(segment.read_bytes() for segment in segments)
    return found


def heap_tuples(data: bytes) -> bytes:
    """The stored tuples of a heap file (live or dead), without the free space between them.

    A page is a 24-byte header (pd_lower at byte 12, pd_upper at 14), then
    4-byte line pointers (offset: 15 bits, flags: 2, length: 15): only what
    a line pointer with a length points to is a tuple; the bytes between
    pd_lower and pd_upper are free space, which VACUUM does not zero.
    """
    tuples = []
    for start in range(0, len(data), PAGE):
        page = data[start : start + PAGE]
        lower = int.from_bytes(page[12:14], "little")
        for pointer in range(24, lower, 4):
            word = int.from_bytes(page[pointer : pointer + 4], "little")
            offset, length = word & 0x7FFF, word >> 17
            if length:
                tuples.append(page[offset : offset + length])
    return b"".join(tuples)


def standing_for(message_id: int, ids) -> int | None:
    """Of a context's `ids`, the one that stands for the message: itself, or a fact drawn from it (which takes
    its place with DELLM_FACTS_CONTEXT=replace, once the worker's facts pass has stored it); None if neither is."""
    drawn = ContextEdge.objects.filter(source_id=message_id, signal=ContextEdge.Signal.FACT)
    found = {message_id, *drawn.values_list("target_id", flat=True)} & set(ids)
    return min(found) if found else None
