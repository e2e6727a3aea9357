"""The measurements over real processes: chat throughput (HTTP + Celery) and the graph page in Chromium.

The web server (`manage.py runserver`, threaded) and a Celery worker run as
child processes on the same database, on a free loopback port and a private
queue, and are stopped afterwards. Clients are bounded in count and time.
"""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from core.auth.tokens import token_create
from dellm_site.celery import worker_command
from lab.bench.measure import stats
from lab.bench.seed import sentences

ROOT = Path(settings.BASE_DIR)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait(predicate, *, process: subprocess.Popen, log: Path, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.2)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def live_services(*, worker_concurrency: int = 2, settings_env: dict[str, str] | None = None):
    """Yield (port, queue) with a web server and a worker running; both stopped on exit.

    `settings_env` adds DELLM_* settings for both processes (the graph page's window at 10,000 nodes)."""
    queue = f"dellm-bench-{uuid.uuid4().hex[:8]}"
    port = _free_port()
    env = {
        **os.environ,
        "DELLM_CELERY_QUEUE": queue,
        # The benchmark's clients send faster than a person types.
        "DELLM_CHAT_RATE": "1000000/min",
        "DELLM_GRAPH_RATE": "1000000/min",
        "DELLM_LOG_LEVEL": "WARNING",
        # DEBUG is off by default: WhiteNoise serves the pages' modules from source.
        "DELLM_STATIC_FROM_SOURCE": "true",
        **(settings_env or {}),
    }
    folder = Path(tempfile.mkdtemp(prefix="dellm-bench-live-"))
    processes = []
    try:
        worker_log = folder / "worker.log"
        worker = subprocess.Popen(
            worker_command(queue=queue, concurrency=worker_concurrency),
            cwd=ROOT,
            env=env,
            stdout=worker_log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        processes.append(worker)
        web_log = folder / "web.log"
        web = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"],
            cwd=ROOT,
            env=env,
            stdout=web_log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        processes.append(web)
        _wait(lambda: " ready." in worker_log.read_text(), process=worker, log=worker_log, what="worker")
        _wait(lambda: _answers(port), process=web, log=web_log, what="web server")
        yield port, queue
    finally:
        for process in processes:
            _stop(process)
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def _request(conn: http.client.HTTPConnection, method: str, path: str, token: str, body=None) -> tuple[int, dict]:
    headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
    payload = None
    if body is not None:
        payload = json.dumps(body)
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=payload, headers=headers)
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"{}")


def throughput_bench(*, owners: list[int], clients: int, seconds: float, max_turns: int, seed: int = 0) -> dict:
    """N clients, each a bench user in its own thread: send a message, poll the turn until done; repeat."""
    tokens = [token_create(user=get_user_model().objects.get(pk=owner))[1] for owner in owners[:clients]]
    texts = sentences(max_turns * 2 + 2, np.random.default_rng(seed + 3))[::2]
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    budget = iter(range(max_turns))
    with live_services(worker_concurrency=2) as (port, _queue):

        def client(token: str) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            status, thread = _request(conn, "POST", "/api/threads/", token, {"title": "bench throughput"})
            if status != 201:
                failures.append(f"thread {status}")
                return
            while time.monotonic() < deadline:
                with lock:
                    number = next(budget, None)
                if number is None:
                    return
                started = time.perf_counter()
                status, body = _request(
                    conn, "POST", f"/api/threads/{thread['id']}/messages/", token, {"content": texts[number]}
                )
                if status != 202:
                    failures.append(f"chat {status}")
                    continue
                turn_id = body["turn"]["id"]
                while time.monotonic() < deadline + 30:
                    status, turn = _request(conn, "GET", f"/api/turns/{turn_id}/", token)
                    if turn.get("status") in ("done", "failed"):
                        break
                    time.sleep(0.02)
                if turn.get("status") == "done":
                    with lock:
                        latencies.append((time.perf_counter() - started) * 1000)
                else:
                    failures.append(f"turn {turn.get('status')}")

        started = time.monotonic()
        deadline = started + seconds
        threads = [threading.Thread(target=client, args=(token,)) for token in tokens]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
    return {
        "clients": len(tokens),
        "seconds": elapsed,
        "turns": len(latencies),
        "turns_per_s": len(latencies) / elapsed if elapsed else 0.0,
        "latency": stats(latencies),
        "failures": len(failures),
        "samples": latencies,
    }


# Records when the explorer says it is interactive (`explorer:ready` on the
# page's host element, frontend/static/js/graph.js). A capturing listener on
# the document sees the event although it does not bubble.
_READY_SCRIPT = """
document.addEventListener("explorer:ready", (event) => {
  window.__benchReady = { at: performance.now(), ...event.detail };
}, true);
"""


def graph_page_missing() -> str | None:
    """Why the graph part cannot run here (checked before any other part spends minutes), or None."""
    if not Path(settings.DELLM_CHROMIUM).exists():
        return f"Debian's Chromium is not at {settings.DELLM_CHROMIUM}"
    dirs = [entry[1] if isinstance(entry, tuple) else entry for entry in settings.STATICFILES_DIRS]
    missing = [str(path) for path in dirs if not Path(path).is_dir()]
    if missing:
        return f"the browser modules are not installed ({', '.join(missing)}; run `npm ci` in frontend/)"
    return None


def graph_page_bench(*, owner_id: int, loads: int, window: int | None = None) -> dict:
    """Time from navigation to the graph explorer's first interactive frame, in headless Chromium.

    `window` opens that many of the owner's newest messages (DELLM_GRAPH_WINDOW and
    DELLM_GRAPH_MAX_NODES raised to it) instead of the default window of 2,000."""
    from playwright.sync_api import sync_playwright

    user = get_user_model().objects.get(pk=owner_id)
    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    settings_env = {}
    if window:
        settings_env = {"DELLM_GRAPH_WINDOW": str(window), "DELLM_GRAPH_MAX_NODES": str(window)}
    timings, details = [], []
    with (
        live_services(worker_concurrency=1, settings_env=settings_env) as (port, _queue),
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=settings.DELLM_CHROMIUM, headless=True)
        try:
            # Playwright's waits evaluate script text, which the app's CSP forbids (no 'unsafe-eval').
            context = browser.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
            context.add_cookies(
                [{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": f"http://127.0.0.1:{port}"}]
            )
            context.add_init_script(_READY_SCRIPT)
            for _ in range(loads):
                page = context.new_page()
                page.goto(f"http://127.0.0.1:{port}/graph/", wait_until="commit")
                page.wait_for_function("window.__benchReady", timeout=60_000)
                ready = page.evaluate("window.__benchReady")
                timings.append(ready["at"])
                details.append(ready)
                page.close()
        finally:
            browser.close()
    last = details[-1]
    return {
        "nodes": last.get("nodes"),
        "edges": last.get("edges"),
        "first_load_ms": timings[0],
        "interactive": stats(timings[1:] or timings),
        "fetch_ms": stats([d.get("fetch", 0) for d in details]),
        "layout_ms": stats([d.get("layout", 0) for d in details]),
        "draw_ms": stats([d.get("draw", 0) for d in details]),
    }
