"""Load on real processes: many open turn streams on one uvicorn process, and a chat + deletion soak.

`streams`: N concurrent Server-Sent Events streams on ONE web process (uvicorn,
as in production), each waiting on a pending turn, then every turn finishes
and each stream must deliver its outcome. Measures the web process's memory
per stream, its threads, and the database connections it used (bounded by its
pool, not by the number of streams).

`soak`: the stack of `make run` (web, worker and beat, started from the
Procfile with its settings) for a set time, while U users sign in and chat
(each turn followed on its stream), delete (preview, confirm), undo, import
small histories (followed on their streams) and read, and S more turn streams
are held open all along. Counts server errors (5xx), unfinished turns and
imports, I1 violations per user, the database connections of each process type
against its pool, and fits the resident memory of every process after warm-up
(MB per minute).

Both run on 127.0.0.1 with their own throwaway users, bounded in count and time.
"""

import asyncio
import json
import os
import random
import resource
import shutil
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
import numpy as np
import psutil
import psycopg
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import connection
from django.utils import timezone

from chat.models import ImportJob, Thread, Turn
from chat.turns.start import turn_create
from chat.turns.stream import channel
from core.auth.tokens import token_create
from dellm_site.celery import worker_command
from provenance.dependents import taint_violations

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
            while True:  # one last sample once stopped: what ran until the end is counted
                stopped = self._stop.is_set()
                rows = conn.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND backend_type = 'client backend' GROUP BY 1"
                ).fetchall()
                self._record(rows)
                if stopped:
                    return
                self._stop.wait(self.interval)

    def _record(self, rows: list[tuple[str, int]]) -> None:
        for name, count in rows:
            self.peak[name] = max(self.peak[name], count)

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
                turn = turn_create(thread=thread, content=f"stream {i}", enqueue=False)
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


# --- soak: the stack of `make run` ------------------------------------------------

SOAK_APP_PREFIX = "dellm-soak-"
# Held turn streams per watcher user, under DELLM_MAX_STREAMS_PER_USER (8).
STREAMS_PER_WATCHER = 4
# Growth of a process's resident memory after warm-up that still reads as flat:
# under 1 MB a minute is under 8 MB over the measured 8 minutes of a 10-minute
# soak, the size of the allocator's noise on these processes (arenas kept,
# caches of compiled queries and templates filled on first use), while a leak
# of one object per request (hundreds of requests a minute) shows above it.
FLAT_MB_PER_MINUTE = 1.0


def procfile_entries(path: Path | None = None) -> dict[str, str]:
    """The process types of `make run` (`honcho start -f Procfile`), name -> command line."""
    entries = {}
    for line in (path or ROOT / "Procfile").read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not name.lstrip().startswith("#"):
            entries[name.strip()] = command.strip()
    return entries


def _pool_budgets(env: dict[str, str]) -> dict[str, int]:
    """The database connections each process type may hold by its settings (web pool; worker children x theirs)."""
    web = int(env.get("DELLM_DB_POOL_MAX") or settings.DELLM_DB_POOL_MAX)
    worker = int(env.get("DELLM_WORKER_DB_POOL_MAX") or settings.DELLM_WORKER_DB_POOL_MAX)
    command = procfile_entries().get("worker", "")
    words = command.split()
    concurrency = int(words[words.index("--concurrency") + 1]) if "--concurrency" in words else os.cpu_count() or 1
    # Beat reads no table (file schedule); if it connected, its pool is the web's size.
    return {"web": web, "worker": worker * concurrency, "beat": web}


@contextmanager
def _stack(*, env: dict[str, str], folder: Path) -> Iterator[tuple[int, dict[str, subprocess.Popen]]]:
    """web, worker and beat as the Procfile starts them for `make run`, on this database; yields (port, processes).

    Each runs through the shell, as honcho runs it, with `make run`'s settings
    (DJANGO_DEBUG=true) and its own PGAPPNAME so `pg_stat_activity` tells its
    connections apart. Logs go to `folder/<name>.log`.
    """
    port = _free_port()
    common = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DJANGO_DEBUG": "true",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        **env,
    }
    processes: dict[str, subprocess.Popen] = {}
    try:
        for name, command in procfile_entries().items():
            extra = {"PGAPPNAME": f"{SOAK_APP_PREFIX}{name}"}
            if name == "beat":  # its schedule file, not the one of a `make run` on this checkout
                extra["DELLM_DATA_DIR"] = str(folder / "beat")
            processes[name] = subprocess.Popen(
                command,
                shell=True,
                cwd=ROOT,
                env={**common, **extra},
                stdout=(folder / f"{name}.log").open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_raise_fd_limit,
            )
        logs = {name: folder / f"{name}.log" for name in processes}
        if "worker" in processes:
            _wait(lambda: " ready." in logs["worker"].read_text(), process=processes["worker"], log=logs["worker"],
                  what="worker")  # fmt: skip
        _wait(lambda: _http_answers(port), process=processes["web"], log=logs["web"], what="uvicorn")
        yield port, processes
    finally:
        for process in reversed(processes.values()):
            _stop(process)


def _http_answers(port: int) -> bool:
    """The application answers (with --reload the socket is bound before the server child is ready)."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/threads/", timeout=2).status_code == 401
    except httpx.HTTPError:
        return False


_SHELLS = ("sh", "bash", "dash")


def _role(command: list[str], *, is_main: bool) -> str:
    text = " ".join(command)
    if "resource_tracker" in text:
        return "resource tracker"
    if "spawn_main" in text:  # uvicorn --reload runs the application in a spawned child
        return "server"
    return "main" if is_main else "child"


class ProcessSampler:
    """Resident memory of every process of each process type (the shell's whole tree), every `interval` seconds."""

    def __init__(self, roots: dict[str, int], interval: float):
        self.roots, self.interval = roots, interval
        self.started = time.monotonic()
        # (type, pid) -> {"command", "samples": [(seconds since start, RSS bytes)]}
        self.processes: dict[tuple[str, int], dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        now = time.monotonic() - self.started
        for kind, root in self.roots.items():
            try:
                top = psutil.Process(root)
                tree = [top, *top.children(recursive=True)]
                # Without an exec, the shell is the root and the program its child.
                main = root if top.name() not in _SHELLS else next((p.pid for p in top.children()), root)
            except psutil.NoSuchProcess:
                continue
            for process in tree:
                try:
                    with process.oneshot():
                        rss = process.memory_info().rss
                        if process.name() in _SHELLS:
                            continue
                        entry = self.processes.get((kind, process.pid))
                        if entry is None:
                            command = process.cmdline()
                            entry = self.processes[(kind, process.pid)] = {
                                "role": _role(command, is_main=process.pid == main),
                                "command": " ".join(command[:6])[:120],
                                "samples": [],
                            }
                except psutil.Error:
                    continue
                entry["samples"].append((now, rss))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> "ProcessSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def summary(self, *, warm_up: float) -> list[dict[str, Any]]:
        """Per process: RSS first / after warm-up / last / peak, and the least-squares slope after warm-up (MB/min)."""
        rows = []
        for (kind, pid), entry in sorted(self.processes.items()):
            samples = entry["samples"]
            after = [(t, rss) for t, rss in samples if t >= warm_up]
            slope = None
            if len(after) >= 3 and after[-1][0] > after[0][0]:
                minutes = np.array([t for t, _ in after]) / 60
                mb = np.array([rss for _, rss in after]) / 2**20
                slope = float(np.polyfit(minutes, mb, 1)[0])
            rows.append(
                {
                    "process": kind,
                    "role": entry["role"],
                    "pid": pid,
                    "command": entry["command"],
                    "samples": len(samples),
                    "rss_first_mb": samples[0][1] / 2**20,
                    "rss_warm_mb": after[0][1] / 2**20 if after else None,
                    "rss_last_mb": samples[-1][1] / 2**20,
                    "rss_peak_mb": max(rss for _, rss in samples) / 2**20,
                    "seen_s": [samples[0][0], samples[-1][0]],
                    "slope_mb_per_min": slope,
                    # For the chart: at most 200 points.
                    "series": [(round(t, 1), round(rss / 2**20, 1)) for t, rss in samples[:: -(-len(samples) // 200)]],
                }
            )
        return rows


class _Http:
    """One client's HTTP session that counts every response by status class; a 429 waits out its Retry-After."""

    def __init__(self, port: int, counts: Counter[str], lock: threading.Lock, deadline: float, *, retry: bool = True):
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
        self.counts, self.lock, self.deadline = counts, lock, deadline
        # False: a client that never comes back after Retry-After (the burst): a 429 or 503 is its answer.
        self.retry = retry

    def _count(self, method: str, path: str, status: int) -> None:
        route = "/".join(part if not part.isdigit() else "{id}" for part in path.split("?")[0].split("/"))
        with self.lock:
            self.counts[str(status)] += 1
            if status >= 500 or status == 429:
                self.counts[f"{status} {method} {route}"] += 1

    def call(self, method: str, path: str, body: dict | None = None, **kwargs: Any) -> httpx.Response:
        try:
            response = self.client.request(method, path, json=body, **kwargs)
        except httpx.HTTPError as exc:
            with self.lock:
                self.counts[f"transport {type(exc).__name__} {method}"] += 1
            raise
        self._count(method, path, response.status_code)
        if self.retry and response.status_code in (429, 503):  # the contract: come back after Retry-After
            self.pause(float(response.headers.get("Retry-After") or 1))
        return response

    def pause(self, seconds: float) -> None:
        time.sleep(max(0.0, min(seconds, self.deadline - time.monotonic())))

    def events(self, path: str, finals: tuple[str, ...], *, stop: threading.Event | None = None) -> str | None:
        """Follow one event stream until one of `finals` (returned), `timeout` ("timeout"), or its end (None)."""
        try:
            with self.client.stream("GET", path, timeout=httpx.Timeout(60, connect=30)) as response:
                self._count("GET", path, response.status_code)
                if response.status_code == 429:
                    self.pause(float(response.headers.get("Retry-After") or 1))
                    return None
                if response.status_code != 200:
                    return None
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        event = line[len("event: ") :]
                        if event in finals or event == "timeout":
                            return event
        except httpx.HTTPError as exc:
            with self.lock:
                self.counts[f"transport {type(exc).__name__} GET events"] += 1
        return None

    def close(self) -> None:
        self.client.close()


_TOPICS = [
    "I grow tomatoes on my balcony in {n} pots.",
    "My brother lives in Porto and runs {n} kilometres a week.",
    "I am learning the cello; lesson {n} was about bowing.",
    "Our team ships a release every {n} days.",
    "What did I tell you about {topic}?",
]


def _jsonl_export(rng: random.Random, tag: str) -> bytes:
    """A small history in the JSONL import format: two conversations of three exchanges, new text each time."""
    lines = []
    for c in range(2):
        for m in range(6):
            n = rng.randrange(10_000)
            text = _TOPICS[rng.randrange(len(_TOPICS) - 1)].format(n=n, topic="")
            role = "user" if m % 2 == 0 else "assistant"
            content = text if role == "user" else f"Noted: {text.lower()}"
            lines.append(json.dumps({"conversation": f"{tag}-{c}", "role": role, "content": content, "id": f"m{m}"}))
    return ("\n".join(lines) + "\n").encode()


class _Soak:
    """What the soak's clients share: the server's port, the deadline, and the tallies."""

    def __init__(self, port: int, deadline: float, mix: dict[str, int]):
        self.port, self.deadline, self.mix = port, deadline, mix
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.actions: Counter[str] = Counter()
        self.turns: dict[int, str] = {}  # turn id -> outcome the client saw
        self.imports: dict[int, str] = {}  # job id -> outcome the client saw
        self.streams_open = 0
        self.stream_reopens = 0
        self.errors: Counter[str] = Counter()

    def http(self) -> _Http:
        return _Http(self.port, self.counts, self.lock, self.deadline)

    def tally(self, key: str) -> None:
        with self.lock:
            self.actions[key] += 1


def _sign_in(http: _Http, username: str, password: str) -> bool:
    while time.monotonic() < http.deadline:
        response = http.call("POST", "/api/auth/token/", {"username": username, "password": password})
        if response.status_code == 200:
            http.client.headers["Authorization"] = f"Token {response.json()['token']}"
            return True
        if response.status_code not in (429, 503):
            return False
    return False


# How often a user picks each action (weights): mostly chat, a deletion every other turn or so, an import rarely
# (DELLM_IMPORT_RATE allows 20 an hour: about 4 in 10 minutes at this mix's pace, some answered 429).
SOAK_MIX = {"chat": 55, "delete": 25, "import": 4, "read": 16}


def _soak_user(soak: _Soak, username: str, password: str, rng: random.Random, start: float) -> None:
    """One user from `start` (monotonic) to the end: sign in, then chat, delete and undo, import, and read."""
    http = soak.http()
    http.pause(start - time.monotonic())
    try:
        if not _sign_in(http, username, password):
            soak.tally("sign-in failed")
            return
        soak.tally("sign-in")
        thread = http.call("POST", "/api/threads/", {"title": "soak"}).json()["id"]
        n = 0
        while time.monotonic() < soak.deadline:
            action = rng.choices(list(soak.mix), weights=list(soak.mix.values()))[0]
            try:
                if action == "chat":
                    n += 1
                    _soak_chat(soak, http, thread, rng, n)
                elif action == "delete":
                    _soak_delete(soak, http, rng)
                elif action == "import":
                    _soak_import(soak, http, rng, f"{username}-{n}")
                else:
                    _soak_read(soak, http, thread)
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                with soak.lock:
                    soak.errors[f"{action} {type(exc).__name__}"] += 1
            http.pause(rng.uniform(0.5, 2.0))
    finally:
        http.close()


def _soak_chat(soak: _Soak, http: _Http, thread: int, rng: random.Random, n: int) -> None:
    text = _TOPICS[rng.randrange(len(_TOPICS))].format(n=n, topic="my brother")
    posted = http.call("POST", f"/api/threads/{thread}/messages/", {"content": text})
    if posted.status_code != 202:
        return
    turn = posted.json()["turn"]["id"]
    soak.tally("chat turn")
    outcome = http.events(f"/api/turns/{turn}/events/", ("reply", "failed"))
    # A turn is followed to its end even past the deadline (every turn must finish): poll if the stream did not say.
    give_up = time.monotonic() + 120
    while outcome not in ("reply", "failed", "done") and time.monotonic() < give_up:
        status = http.call("GET", f"/api/turns/{turn}/").json().get("status")
        outcome = status if status in ("done", "failed") else None
        if outcome is None:
            time.sleep(0.5)
    soak.turns[turn] = {"reply": "done"}.get(outcome or "", outcome or "unfinished")


def _soak_delete(soak: _Soak, http: _Http, rng: random.Random) -> None:
    live = http.call("GET", "/api/messages/?page_size=50").json()
    live = live.get("results", []) if isinstance(live, dict) else []
    if not live:
        return
    target = rng.choice(live)["id"]
    mode = rng.choice(("soft", "soft", "soft", "purge"))
    preview = http.call("POST", "/api/deletions/", {"select": {"ids": [target]}, "mode": mode})
    if preview.status_code != 201:
        return
    deletion = preview.json()["id"]
    confirmed = http.call("POST", f"/api/deletions/{deletion}/confirm/")
    soak.tally(f"deletion {mode} confirm {confirmed.status_code}")
    if mode == "soft" and confirmed.status_code == 200 and rng.random() < 0.6:
        http.pause(rng.uniform(0.2, 1.5))
        undone = http.call("POST", f"/api/deletions/{deletion}/undo/")
        soak.tally(f"deletion undo {undone.status_code}")


def _soak_import(soak: _Soak, http: _Http, rng: random.Random, tag: str) -> None:
    upload = http.call(
        "POST",
        "/api/imports/",
        files={"file": (f"{tag}.jsonl", _jsonl_export(rng, tag), "application/x-ndjson")},
        data={"format": "jsonl"},
    )
    if upload.status_code != 202:
        soak.tally(f"import upload {upload.status_code}")
        return
    job = upload.json()["id"]
    soak.tally("import")
    outcome = http.events(f"/api/imports/{job}/events/", ("done", "failed"))
    give_up = time.monotonic() + 300
    while outcome not in ("done", "failed") and time.monotonic() < give_up:
        status = http.call("GET", f"/api/imports/{job}/").json().get("status")
        outcome = status if status in ("done", "failed") else None
        if outcome is None:
            time.sleep(1.0)
    soak.imports[job] = outcome or "unfinished"


def _soak_read(soak: _Soak, http: _Http, thread: int) -> None:
    http.call("GET", f"/api/threads/{thread}/")
    http.call("GET", f"/api/graph/?thread={thread}")
    http.call("GET", "/api/deletions/")
    soak.tally("read")


def _soak_watch(soak: _Soak, http: _Http, turn: int, finished: threading.Event, outcome: dict[int, str]) -> None:
    """Hold a stream on a pending turn for the whole run, reopening it after each `timeout`; then see its outcome."""
    while True:
        with soak.lock:
            soak.streams_open += 1
        try:
            event = http.events(f"/api/turns/{turn}/events/", ("reply", "failed"))
        finally:
            with soak.lock:
                soak.streams_open -= 1
        if event in ("reply", "failed"):
            outcome[turn] = event
            return
        if finished.is_set() and time.monotonic() > soak.deadline + 120:
            outcome[turn] = "not delivered"
            return
        with soak.lock:
            soak.stream_reopens += 1
        if event is None:
            time.sleep(0.5)


def _watched_turns(count: int, tag: str) -> tuple[list[tuple[Any, str]], list[tuple[int, str]]]:
    """`count` pending turns, never enqueued, over watcher users (STREAMS_PER_WATCHER each), with their tokens."""
    watchers = _make_users(-(-count // STREAMS_PER_WATCHER), f"{tag}-watch")
    turns: list[tuple[int, str]] = []
    for user, token in watchers:
        thread = Thread.objects.create(owner=user, title="soak streams")
        for i in range(STREAMS_PER_WATCHER):
            if len(turns) < count:
                turns.append((turn_create(thread=thread, content=f"held {i}", enqueue=False).pk, token))
    return watchers, turns


def _turns_announce(turn_ids: list[int]) -> None:
    """Publish a change on each turn's channel, as the worker does when a turn moves."""
    client = redis.Redis.from_url(settings.REDIS_URL, **settings.DELLM_REDIS_OPTIONS)
    with client.pipeline(transaction=False) as pipe:
        for turn_id in turn_ids:
            pipe.publish(channel(turn_id), json.dumps({"event": "changed", "data": {}}))
        pipe.execute()


class _Connections(ConnectionSampler):
    """ConnectionSampler, plus the peak of all client connections to this database together.

    Sampled every 50 ms: Celery's prefork worker closes a child's connection pool after every
    task (celery.fixups.django, for a pool-enabled database), so a worker connection lives only
    as long as one task, often under a tenth of a second.
    """

    def __init__(self, interval: float = 0.05):
        super().__init__(interval)
        self.peak_total = 0

    def _record(self, rows: list[tuple[str, int]]) -> None:
        super()._record(rows)
        self.peak_total = max(self.peak_total, sum(count for _, count in rows))


def _log_findings(folder: Path) -> dict[str, dict[str, int]]:
    """Per process type: ERROR and CRITICAL log lines and tracebacks, by their first words (the logs hold ids only)."""
    found: dict[str, dict[str, int]] = {}
    for log in sorted(folder.glob("*.log")):
        tally: Counter[str] = Counter()
        for line in log.read_text(errors="replace").splitlines():
            if " ERROR" in line or " CRITICAL" in line or line.startswith("Traceback"):
                tally[" ".join(line.split()[:8])[:160]] += 1
        found[log.stem] = dict(tally.most_common(20))
    return found


def soak_bench(
    *,
    users: int,
    streams: int,
    seconds: float,
    warm_up: float | None = None,
    sample_every: float = 5.0,
    env: dict[str, str] | None = None,
    mix: dict[str, int] | None = None,
    logs: Path | None = None,
    seed: int = 0,
) -> dict:
    """`users` users chatting, deleting, undoing and importing for `seconds`, with `streams` turn streams held open.

    Against web + worker + beat started from the Procfile as `make run` does.
    The users arrive one by one over the warm-up. Every process's memory is
    sampled every `sample_every` seconds and its slope fitted after `warm_up`
    seconds (default: the first fifth, at most 120 s); connections per process
    type are sampled from `pg_stat_activity`. Then every held stream must
    deliver its turn's end, and each user is checked for I1.
    `mix` weighs the users' actions (SOAK_MIX). Logs of the three process types
    land in `logs` (kept) or a temporary folder.
    """
    env = {
        # All simulated users sign in from 127.0.0.1, and the sign-in throttle counts per address.
        "DELLM_AUTH_RATE": "1000000/min",
        **(env or {}),
    }
    warm_up = min(120.0, seconds / 5) if warm_up is None else warm_up
    rng = random.Random(seed)
    tag = f"soak-{uuid.uuid4().hex[:6]}"
    password = uuid.uuid4().hex
    owners = []
    for i in range(users):
        owners.append(get_user_model().objects.create_user(username=f"{USER_PREFIX}{tag}-{i}", password=None))
    get_user_model().objects.filter(pk__in=[user.pk for user in owners]).update(password=make_password(password))
    watchers, held = _watched_turns(streams, tag)
    held_ids = [turn_id for turn_id, _ in held]
    folder = logs or Path(tempfile.mkdtemp(prefix="dellm-bench-soak-"))
    folder.mkdir(parents=True, exist_ok=True)
    _raise_fd_limit()
    try:
        with _stack(env=env, folder=folder) as (port, processes):
            roots = {name: process.pid for name, process in processes.items()}
            # Connections are sampled until every turn and import has settled: the worker's last tasks
            # may still run after the clients stop.
            with ProcessSampler(roots, sample_every) as memory, _Connections() as connections:
                soak = _Soak(port, time.monotonic() + seconds, mix or SOAK_MIX)
                finished = threading.Event()
                held_outcome: dict[int, str] = {}
                watch = []
                for turn, token in held:
                    http = soak.http()
                    http.client.headers["Authorization"] = f"Token {token}"
                    watch.append(threading.Thread(target=_soak_watch, args=(soak, http, turn, finished, held_outcome)))
                for thread in watch:
                    thread.start()
                # Users arrive spread over the warm-up, as people do: each sign-in checks a password
                # (PBKDF2, DELLM_SIGN_IN_CONCURRENCY at a time), 50 at one instant are a burst of CPU.
                started = time.monotonic()
                clients = [
                    threading.Thread(
                        target=_soak_user,
                        args=(
                            soak,
                            user.username,
                            password,
                            random.Random(rng.random()),
                            started + i * warm_up / users,
                        ),
                    )
                    for i, user in enumerate(owners)
                ]
                for thread in clients:
                    thread.start()
                streams_low = None
                while alive := [thread for thread in clients if thread.is_alive()]:
                    # A held turn is a slow reply, not a stuck one: keep it out of the stuck-turn sweep.
                    Turn.objects.filter(pk__in=held_ids, status=Turn.Status.PENDING).update(updated_at=timezone.now())
                    if time.monotonic() - started > warm_up and time.monotonic() < soak.deadline:
                        streams_low = soak.streams_open if streams_low is None else min(streams_low, soak.streams_open)
                    alive[0].join(5)
                elapsed = time.monotonic() - started
                # Every held stream must still deliver its turn's end.
                Turn.objects.filter(pk__in=held_ids).update(status=Turn.Status.FAILED, error="soak finished")
                finished.set()
                _turns_announce(held_ids)
                for thread in watch:
                    thread.join(150)
                memory_rows = memory.summary(warm_up=warm_up)
                owner_ids = [user.pk for user in owners]
                settle = time.monotonic() + 120
                while time.monotonic() < settle and (
                    Turn.objects.filter(owner_id__in=owner_ids, status__in=["pending", "running"]).exists()
                    or ImportJob.objects.filter(owner_id__in=owner_ids, status__in=["pending", "running"]).exists()
                ):
                    time.sleep(1)
            turn_states = Counter(Turn.objects.filter(owner_id__in=owner_ids).values_list("status", flat=True))
            turn_errors = Counter(
                Turn.objects.filter(owner_id__in=owner_ids, status="failed").values_list("error", flat=True)
            )
            import_states = Counter(ImportJob.objects.filter(owner_id__in=owner_ids).values_list("status", flat=True))
            import_errors = Counter(
                ImportJob.objects.filter(owner_id__in=owner_ids, status="failed").values_list("error", flat=True)
            )
            checked = owner_ids + [user.pk for user, _ in watchers]
            violations = {owner: len(taint_violations(owner_id=owner)) for owner in checked}
        findings = _log_findings(folder)
    finally:
        load_users_delete()
        if logs is None:
            shutil.rmtree(folder, ignore_errors=True)
    budgets = _pool_budgets(env)
    peaks = {kind: connections.peak.get(f"{SOAK_APP_PREFIX}{kind}", 0) for kind in budgets}
    counts = soak.counts
    return {
        "users": users,
        "streams": streams,
        "seconds": elapsed,
        "warm_up_s": warm_up,
        "sample_every_s": sample_every,
        "environment": env,
        "mix": mix or SOAK_MIX,
        "requests": sum(n for key, n in counts.items() if key.isdigit()),
        "responses": dict(sorted(counts.items())),
        "server_errors": sum(n for key, n in counts.items() if key.isdigit() and key.startswith("5")),
        "client_errors": dict(soak.errors),
        "actions": dict(sorted(soak.actions.items())),
        "turns_posted": len(soak.turns),
        "turn_outcomes_seen": dict(Counter(soak.turns.values())),
        "turns": dict(turn_states),
        "unfinished_turns": turn_states.get("pending", 0) + turn_states.get("running", 0),
        "failure_reasons": dict(turn_errors),
        "imports_posted": len(soak.imports),
        "import_outcomes_seen": dict(Counter(soak.imports.values())),
        "imports": dict(import_states),
        "unfinished_imports": import_states.get("pending", 0) + import_states.get("running", 0),
        "import_failure_reasons": dict(import_errors),
        "held_streams_delivered": sum(1 for outcome in held_outcome.values() if outcome in ("reply", "failed")),
        "held_streams_open_low": streams_low,
        "held_stream_reopens": soak.stream_reopens,
        "i1_violations": sum(violations.values()),
        "users_checked_for_i1": len(violations),
        "memory": memory_rows,
        "memory_flat_mb_per_min": FLAT_MB_PER_MINUTE,
        "db_connections_peak": peaks,
        "db_connections_peak_total": connections.peak_total,
        "db_connections_budget": budgets,
        "log_findings": findings,
        "logs": str(folder) if logs else None,
    }


def _burst_user(soak: _Soak, username: str, password: str, start: threading.Barrier, messages: int) -> None:
    """Sign in the moment every user is ready, send `messages` as fast as the replies come, then preview,
    confirm and undo a deletion; never paced, never retried."""
    http = _Http(soak.port, soak.counts, soak.lock, soak.deadline, retry=False)
    try:
        start.wait()
        response = http.call("POST", "/api/auth/token/", {"username": username, "password": password})
        if response.status_code != 200:
            soak.tally(f"sign-in {response.status_code}")
            return
        http.client.headers["Authorization"] = f"Token {response.json()['token']}"
        created = http.call("POST", "/api/threads/", {"title": "burst"})
        if created.status_code != 201:
            return
        thread = created.json()["id"]
        for n in range(messages):
            posted = http.call(
                "POST", f"/api/threads/{thread}/messages/", {"content": f"Burst message {n}: I like tea."}
            )
            if posted.status_code != 202:
                continue
            turn = posted.json()["turn"]["id"]
            outcome = http.events(f"/api/turns/{turn}/events/", ("reply", "failed"))
            soak.turns[turn] = {"reply": "done"}.get(outcome or "", outcome or "unfinished")
        listed = http.call("GET", "/api/messages/?page_size=5")
        live = listed.json().get("results", []) if listed.status_code == 200 else []
        if not live:
            return
        preview = http.call("POST", "/api/deletions/", {"select": {"ids": [live[0]["id"]]}, "mode": "soft"})
        if preview.status_code == 201:
            deletion = preview.json()["id"]
            confirmed = http.call("POST", f"/api/deletions/{deletion}/confirm/")
            if confirmed.status_code == 200:
                http.call("POST", f"/api/deletions/{deletion}/undo/")
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        with soak.lock:
            soak.errors[type(exc).__name__] += 1
    finally:
        http.close()


def burst_bench(*, users: int, messages: int = 8, env: dict[str, str] | None = None, logs: Path | None = None) -> dict:
    """`users` arriving at once on a cold `make run` stack, with no pacing and no retry after Retry-After.

    The stack (web, worker, beat from the Procfile) starts for this run and the users begin the moment it
    answers: each signs in, sends `messages` as fast as the replies come, then previews, confirms and undoes a
    deletion. Every answer counts; the target is no 5xx at all (docs/SECURITY.md, "Bounded work").
    """
    env = {"DELLM_AUTH_RATE": "1000000/min", **(env or {})}
    tag = f"burst-{uuid.uuid4().hex[:6]}"
    password = uuid.uuid4().hex
    owners = [get_user_model().objects.create_user(username=f"{USER_PREFIX}{tag}-{i}") for i in range(users)]
    get_user_model().objects.filter(pk__in=[user.pk for user in owners]).update(password=make_password(password))
    folder = logs or Path(tempfile.mkdtemp(prefix="dellm-bench-burst-"))
    folder.mkdir(parents=True, exist_ok=True)
    _raise_fd_limit()
    try:
        with _stack(env=env, folder=folder) as (port, _):
            soak = _Soak(port, time.monotonic() + 600, {})
            start = threading.Barrier(users)
            clients = [
                threading.Thread(target=_burst_user, args=(soak, owner.username, password, start, messages))
                for owner in owners
            ]
            started = time.monotonic()
            for client in clients:
                client.start()
            for client in clients:
                client.join()
            seconds = time.monotonic() - started
    finally:
        load_users_delete()
    statuses = {key: count for key, count in soak.counts.items() if key.isdigit()}
    return {
        "users": users,
        "messages": messages,
        "seconds": seconds,
        "requests": sum(statuses.values()),
        "statuses": dict(sorted(statuses.items())),
        "server_errors": sum(count for status, count in statuses.items() if int(status) >= 500),
        "refused": {key: count for key, count in sorted(soak.counts.items()) if not key.isdigit()},
        "turns": dict(Counter(soak.turns.values())),
        "client_errors": dict(soak.errors),
        "logs": str(folder),
    }
