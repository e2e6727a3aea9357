"""Load on real processes: many open turn streams on one uvicorn process, and a chat + deletion soak.

`streams`: N concurrent Server-Sent Events streams on ONE web process (uvicorn,
as in production), each waiting on a pending turn, then every turn finishes
and each stream must deliver its outcome. Measures the web process's memory
per stream, its threads, and the database connections it used (bounded by its
pool, not by the number of streams).

`soak`: U users chatting at once through the HTTP API (each turn followed on
its stream) while a second client per user soft-deletes, restores and purges
that user's messages, against uvicorn + a Celery worker. Counts server errors
(5xx), unfinished turns, I1 violations per user, and the database connections
each process used against its pool.

Both run on 127.0.0.1 with their own throwaway users, bounded in count and time.
"""

import asyncio
import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psutil
import psycopg
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from chat import services
from chat.models import Thread, Turn
from chat.streams import channel
from dellm_site.auth import token_create
from dellm_site.celery import worker_command
from provenance.selectors import taint_violations

ROOT = Path(settings.BASE_DIR)
USER_PREFIX = "loadbench-"
WEB_APP_NAME = "dellm-bench-web"
WORKER_APP_NAME = "dellm-bench-worker"


def _database_url() -> str:
    """The URL of the database this process uses (the test database under pytest), for child processes."""
    db = connection.settings_dict
    user, password = quote(db["USER"] or ""), quote(str(db.get("PASSWORD") or ""))
    host = db["HOST"] or ""
    if not host or host.startswith("/"):
        return f"postgresql://{user}:{password}@/{db['NAME']}?host={host}" + (
            f"&port={db['PORT']}" if db.get("PORT") else ""
        )
    return f"postgresql://{user}:{password}@{host}:{db.get('PORT') or 5432}/{db['NAME']}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait(predicate: Any, *, process: subprocess.Popen, log: Path, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def _services(*, env: dict[str, str], worker_concurrency: int = 0) -> Iterator[tuple[int, psutil.Process]]:
    """uvicorn (one process) and optionally a Celery worker on a private queue; yields (port, web process)."""
    queue = f"dellm-bench-{uuid.uuid4().hex[:8]}"
    port = _free_port()
    common = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DELLM_CELERY_QUEUE": queue,
        "DELLM_CHAT_RATE": "1000000/min",
        "DELLM_LOG_LEVEL": "WARNING",
        **env,
    }
    folder = Path(tempfile.mkdtemp(prefix="dellm-bench-load-"))
    processes: list[subprocess.Popen] = []
    try:
        if worker_concurrency:
            worker_log = folder / "worker.log"
            worker = subprocess.Popen(
                worker_command(queue=queue, concurrency=worker_concurrency),
                cwd=ROOT,
                env={**common, "PGAPPNAME": WORKER_APP_NAME},
                stdout=worker_log.open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            processes.append(worker)
            _wait(lambda: " ready." in worker_log.read_text(), process=worker, log=worker_log, what="worker")
        web_log = folder / "web.log"
        web = subprocess.Popen(
            [
                sys.executable, "-m", "uvicorn", "dellm_site.asgi:application", "--host", "127.0.0.1",
                "--port", str(port), "--no-access-log", "--log-level", "warning", "--backlog", "4096",
            ],
            cwd=ROOT,
            env={**common, "PGAPPNAME": WEB_APP_NAME},
            stdout=web_log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_raise_fd_limit,
        )  # fmt: skip
        processes.append(web)
        _wait(lambda: _answers(port), process=web, log=web_log, what="uvicorn")
        yield port, psutil.Process(web.pid)
    finally:
        for process in reversed(processes):
            _stop(process)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


class ConnectionSampler:
    """Peak client connections to this database per application_name (PGAPPNAME of each process)."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.peak: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(_database_url(), autocommit=True) as conn:
            while not self._stop.is_set():
                rows = conn.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND backend_type = 'client backend' GROUP BY 1"
                ).fetchall()
                for name, count in rows:
                    self.peak[name] = max(self.peak[name], count)
                self._stop.wait(self.interval)

    def __enter__(self) -> "ConnectionSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def _run_async(coro: Any) -> Any:
    """`asyncio.run` on a thread of its own (the caller's thread may already run a loop: Playwright's, in tests)."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def _make_users(count: int, tag: str) -> list[tuple[Any, str]]:
    users = []
    for i in range(count):
        user = get_user_model().objects.create_user(username=f"{USER_PREFIX}{tag}-{i}", password=uuid.uuid4().hex)
        users.append((user, token_create(user=user)[1]))
    return users


def load_users_delete() -> int:
    deleted, _ = get_user_model().objects.filter(username__startswith=USER_PREFIX).delete()
    return deleted


# --- streams ---------------------------------------------------------------------


async def _open_stream(port: int, turn_id: int, token: str, opened: asyncio.Event, state: dict[str, Any]) -> None:
    request = (
        f"GET /api/turns/{turn_id}/events/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Token {token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**16)
    except OSError as exc:
        state["error"] = type(exc).__name__
        opened.set()
        return
    buffer = b""
    try:
        writer.write(request)
        await writer.drain()
        while b"event: failed" not in buffer and b"event: reply" not in buffer:
            chunk = await reader.read(4096)
            if not chunk:
                state["error"] = state.get("error") or "closed"
                break
            buffer += chunk
            if not state.get("status") and b"\r\n" in buffer:
                state["status"] = int(buffer.split(b" ", 2)[1])
            if b"event: status" in buffer and not opened.is_set():
                opened.set()
        state["final"] = b"event: failed" in buffer or b"event: reply" in buffer
        if state.get("status") != 200 and b'"code": "' in buffer:
            state["code"] = buffer.split(b'"code": "', 1)[1].split(b'"', 1)[0].decode()
        state["timeout"] = b"event: timeout" in buffer
    except (OSError, asyncio.IncompleteReadError) as exc:
        state["error"] = type(exc).__name__
    finally:
        opened.set()
        writer.close()


async def _streams_run(
    *, port: int, turns: list[tuple[int, str]], web: psutil.Process, finish: Any, handshakes: int, wait: float
) -> dict[str, Any]:
    states = [{} for _ in turns]
    events = [asyncio.Event() for _ in turns]
    gate = asyncio.Semaphore(handshakes)

    async def one(index: int) -> None:
        async with gate:
            task = asyncio.create_task(
                _open_stream(port, turns[index][0], turns[index][1], events[index], states[index])
            )
            await events[index].wait()
        await task

    started = time.monotonic()
    tasks = [asyncio.create_task(one(i)) for i in range(len(turns))]
    await asyncio.wait_for(asyncio.gather(*(event.wait() for event in events)), timeout=wait)
    open_seconds = time.monotonic() - started
    await asyncio.sleep(1.0)  # let the server settle before reading its memory
    held = {"rss": web.memory_info().rss, "threads": web.num_threads()}
    opened = sum(1 for state in states if state.get("status") == 200 and "error" not in state)
    await asyncio.to_thread(finish)
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=wait)
    return {
        "open_seconds": open_seconds,
        "opened": opened,
        "held": held,
        "delivered": sum(1 for state in states if state.get("final")),
        "errors": dict(Counter(state["error"] for state in states if "error" in state)),
        "statuses": dict(Counter(str(state.get("status")) for state in states)),
        "error_codes": dict(Counter(state["code"] for state in states if "code" in state)),
    }


def streams_bench(*, streams: int, users: int, pool: int, handshakes: int = 100, wait: float = 180.0) -> dict:
    """`streams` concurrent SSE streams (over `users` users) on one uvicorn process whose pool holds `pool`."""
    per_user = -(-streams // users)
    owners = _make_users(users, f"streams-{uuid.uuid4().hex[:6]}")
    turns: list[tuple[int, str]] = []
    for user, token in owners:
        thread = Thread.objects.create(owner=user, title="bench streams")
        for i in range(per_user):
            if len(turns) < streams:
                turn = services.turn_create(thread=thread, content=f"stream {i}", enqueue=False)
                turns.append((turn.pk, token))
    turn_ids = [turn_id for turn_id, _ in turns]

    def finish() -> None:
        Turn.objects.filter(pk__in=turn_ids).update(status=Turn.Status.FAILED, error="bench finished")
        client = redis.Redis.from_url(settings.REDIS_URL, **settings.DELLM_REDIS_OPTIONS)
        with client.pipeline(transaction=False) as pipe:
            for turn_id in turn_ids:
                pipe.publish(channel(turn_id), json.dumps({"event": "changed", "data": {}}))
            pipe.execute()

    env = {
        "DELLM_DB_POOL_MAX": str(pool),
        "DELLM_MAX_STREAMS_PER_USER": str(per_user + 1),
        "DELLM_SSE_TIMEOUT": str(wait + 60),
    }
    try:
        with _services(env=env) as (port, web), ConnectionSampler() as sampler:
            # One finished stream first, so imports and the first pool connection are not counted per stream.
            Turn.objects.filter(pk=turn_ids[0]).update(status=Turn.Status.FAILED)
            warm = _run_async(
                _streams_run(port=port, turns=turns[:1], web=web, finish=lambda: None, handshakes=1, wait=30)
            )
            Turn.objects.filter(pk=turn_ids[0]).update(status=Turn.Status.PENDING)
            before = {"rss": web.memory_info().rss, "threads": web.num_threads()}
            _raise_fd_limit()
            result = _run_async(
                _streams_run(port=port, turns=turns, web=web, finish=finish, handshakes=handshakes, wait=wait)
            )
    finally:
        load_users_delete()
    held = result.pop("held")
    return {
        "streams": len(turns),
        "users": users,
        "pool_max": pool,
        "warm_up_delivered": warm["delivered"],
        **result,
        "failed_streams": len(turns) - min(result["opened"], result["delivered"]),
        "rss_before_mb": before["rss"] / 2**20,
        "rss_held_mb": held["rss"] / 2**20,
        "kb_per_stream": (held["rss"] - before["rss"]) / 1024 / len(turns),
        "threads_before": before["threads"],
        "threads_held": held["threads"],
        "db_connections_peak": sampler.peak.get(WEB_APP_NAME, 0),
    }


# --- soak ------------------------------------------------------------------------


class _Http:
    """One user's HTTP client that counts every response by status class."""

    def __init__(self, port: int, token: str, counts: Counter[str], lock: threading.Lock):
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Token {token}"}, timeout=60
        )
        self.counts, self.lock = counts, lock

    def call(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        try:
            response = self.client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            with self.lock:
                self.counts[f"transport {type(exc).__name__}"] += 1
            raise
        with self.lock:
            self.counts[f"{response.status_code}"] += 1
            if response.status_code >= 500:
                self.counts[f"5xx {method} {path.split('/')[2]}"] += 1
        return response

    def follow(self, turn_id: int, deadline: float) -> str:
        """The turn's outcome from its stream; polls if the stream ends without one."""
        with self.client.stream("GET", f"/api/turns/{turn_id}/events/", timeout=120) as response:
            with self.lock:
                self.counts[f"{response.status_code}"] += 1
            if response.status_code == 200:
                for line in response.iter_lines():
                    if line in ("event: reply", "event: failed"):
                        return "done" if line == "event: reply" else "failed"
        while time.monotonic() < deadline:
            status = self.call("GET", f"/api/turns/{turn_id}/").json().get("status")
            if status in ("done", "failed"):
                return status
            time.sleep(0.5)
        return "unfinished"


_TOPICS = [
    "I grow tomatoes on my balcony in {n} pots.",
    "My brother lives in Porto and runs {n} kilometres a week.",
    "I am learning the cello; lesson {n} was about bowing.",
    "Our team ships a release every {n} days.",
    "What did I tell you about {topic}?",
]


def soak_bench(
    *, users: int, turns: int, web_pool: int, worker_concurrency: int, worker_pool: int, seed: int = 0
) -> dict:
    """`users` chatting `turns` turns each while their messages are soft-deleted, restored and purged."""
    rng = random.Random(seed)
    owners = _make_users(users, f"soak-{uuid.uuid4().hex[:6]}")
    counts: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    deletions: Counter[str] = Counter()
    lock = threading.Lock()
    env = {
        "DELLM_DB_POOL_MAX": str(web_pool),
        "DELLM_WORKER_DB_POOL_MAX": str(worker_pool),
        "DELLM_MAX_STREAMS_PER_USER": "4",
    }
    try:
        with (
            _services(env=env, worker_concurrency=worker_concurrency) as (port, _web),
            ConnectionSampler() as sampler,
        ):
            deadline = time.monotonic() + 600
            chatting = {user.pk: True for user, _ in owners}

            def chatter(token: str, user_id: int, user_rng: random.Random) -> None:
                http = _Http(port, token, counts, lock)
                try:
                    thread = http.call("POST", "/api/threads/", {"title": "soak"}).json()
                    for n in range(turns):
                        text = _TOPICS[user_rng.randrange(len(_TOPICS))].format(n=n + 1, topic="my brother")
                        posted = http.call("POST", f"/api/threads/{thread['id']}/messages/", {"content": text})
                        if posted.status_code != 202:
                            continue
                        outcome = http.follow(posted.json()["turn"]["id"], deadline)
                        with lock:
                            outcomes[outcome] += 1
                finally:
                    chatting[user_id] = False

            def deleter(token: str, user_id: int, user_rng: random.Random) -> None:
                http = _Http(port, token, counts, lock)
                while chatting[user_id] and time.monotonic() < deadline:
                    time.sleep(user_rng.uniform(0.2, 0.8))
                    live = http.call("GET", "/api/messages/?page_size=50").json().get("results", [])
                    if not live:
                        continue
                    target = user_rng.choice(live)["id"]
                    mode = user_rng.choice(["soft", "soft", "purge"])
                    preview = http.call("POST", "/api/deletions/", {"select": {"ids": [target]}, "mode": mode})
                    if preview.status_code != 201:
                        continue
                    deletion_id = preview.json()["id"]
                    confirmed = http.call("POST", f"/api/deletions/{deletion_id}/confirm/")
                    with lock:
                        deletions[f"{mode} {confirmed.status_code}"] += 1
                    if mode == "soft" and confirmed.status_code == 200 and user_rng.random() < 0.6:
                        undone = http.call("POST", f"/api/deletions/{deletion_id}/undo/")
                        with lock:
                            deletions[f"undo {undone.status_code}"] += 1

            started = time.monotonic()
            threads = []
            for user, token in owners:
                for target in (chatter, deleter):
                    threads.append(threading.Thread(target=target, args=(token, user.pk, random.Random(rng.random()))))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
            # Every turn finished: none left pending or running once the clients are done.
            owner_ids = [user.pk for user, _ in owners]
            settle = time.monotonic() + 60
            while Turn.objects.filter(owner_id__in=owner_ids, status__in=["pending", "running"]).exists():
                if time.monotonic() > settle:
                    break
                time.sleep(0.5)
            turn_states = Counter(Turn.objects.filter(owner_id__in=owner_ids).values_list("status", flat=True))
            turn_errors = Counter(
                Turn.objects.filter(owner_id__in=owner_ids, status="failed").values_list("error", flat=True)
            )
            violations = {owner: len(taint_violations(owner_id=owner)) for owner in owner_ids}
        server_errors = sum(n for key, n in counts.items() if key.startswith("5") and key[:3].isdigit())
        return {
            "users": users,
            "turns_per_user": turns,
            "seconds": elapsed,
            "requests": sum(n for key, n in counts.items() if key[:3].isdigit()),
            "responses": {key: n for key, n in sorted(counts.items())},
            "server_errors": server_errors,
            "turns": dict(turn_states),
            "unfinished_turns": turn_states.get("pending", 0) + turn_states.get("running", 0),
            "failure_reasons": dict(turn_errors),
            "stream_outcomes": dict(outcomes),
            "deletions": dict(sorted(deletions.items())),
            "i1_violations": sum(violations.values()),
            "users_checked_for_i1": len(violations),
            "db_connections_peak": {
                "web": sampler.peak.get(WEB_APP_NAME, 0),
                "worker": sampler.peak.get(WORKER_APP_NAME, 0),
            },
            "db_connections_budget": {"web": web_pool, "worker": worker_concurrency * worker_pool},
        }
    finally:
        load_users_delete()
