"""Every fixture of the suite, in one place (helpers that are not fixtures are in tests/helpers.py,
tests/factories.py and tests/pages.py)."""

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from playwright.sync_api import sync_playwright
from rest_framework.test import APIClient

from dellm_site.celery import app as celery_app
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from tests.factories import KEPT, SECRET, SECRET_WORD, make_edge, make_message, make_thread, make_user, unit_vector
from tests.fake_openai import FakeOpenAI
from tests.helpers import ROOT, AsgiServer, Worker, cache_clear, client_for
from tests.pages import sign_in

# --- Every test ---------------------------------------------------------------


@pytest.fixture(autouse=True)
def _celery_eager(request):
    """Run tasks in-process unless a test starts a real worker (marker `worker`)."""
    eager = request.node.get_closest_marker("worker") is None
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = eager
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture(autouse=True)
def _fresh_throttle():
    """Throttles count in the shared Redis cache; each test starts with none used (this instance's keys only)."""
    cache_clear()
    yield
    cache_clear()


@pytest.fixture
def fast_hasher(settings):
    """For tests that sign in dozens of times: PBKDF2 would spend a second on each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# --- Users and data ---------------------------------------------------------


@pytest.fixture
def owner(db):
    return make_user("alice")


@pytest.fixture
def other_owner(db):
    return make_user("bob")


@pytest.fixture
def thread(owner):
    return make_thread(owner, "main")


@pytest.fixture
def tell(api, thread, django_capture_on_commit_callbacks):
    """Post a chat message and run its turn and what follows it (Celery is eager); {"message", "turn"} as read back."""

    def tell(text: str, thread_id: int | None = None) -> dict:
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(f"/api/threads/{thread_id or thread.pk}/messages/", {"content": text}, format="json")
        assert response.status_code == 202, response.content
        body = response.json()
        return {"message": body["message"], "turn": api.get(f"/api/turns/{body['turn']['id']}/").json()}

    return tell


@pytest.fixture
def openai_server(settings):
    """A local OpenAI-compatible server that the real `openai` client talks to."""
    with FakeOpenAI(default_text="Paris, as you said.") as server:
        settings.OPENAI_BASE_URL = server.url
        settings.OPENAI_API_KEY = "test-key"
        settings.DELLM_CHAT_MODEL = "fake-model"
        settings.DELLM_LLM_TIMEOUT = 1
        yield server


# --- HTTP API -------------------------------------------------------------------


@pytest.fixture
def api(owner) -> APIClient:
    return client_for(owner)


@pytest.fixture
def other_api(other_owner) -> APIClient:
    return client_for(other_owner)


# --- Admin ----------------------------------------------------------------------


@pytest.fixture
def staff(db):
    """A superuser: every admin permission, including data-subject deletions."""
    return make_user("root", is_staff=True, is_superuser=True)


@pytest.fixture
def clerk(db):
    """Staff who may read the deletion audit and nothing else."""
    user = make_user("clerk", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_deletionrequest"))
    return user


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def history(owner, thread):
    """A purged secret (with a reply built from it), a soft deletion, a pending preview and a live message."""
    secret = make_message(thread, SECRET, embedding=unit_vector(1))
    reply = make_message(thread, f"Noted: {SECRET}", role="assistant", embedding=unit_vector(2))
    make_edge(secret, reply, rank=0, score=1.0)
    kept = make_message(thread, KEPT, embedding=unit_vector(3))
    lyon = make_message(thread, "I live in Lyon", embedding=unit_vector(4))
    purge = deletion_preview(owner=owner, actor=owner, mode="purge", exact=SECRET_WORD)
    purge = deletion_confirm(deletion_id=purge.pk, owner_id=owner.pk, confirmed_by=owner)
    soft = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[lyon.pk])
    soft = deletion_confirm(deletion_id=soft.pk, owner_id=owner.pk, confirmed_by=owner)
    pending = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[kept.pk])
    return SimpleNamespace(
        secret=secret, reply=reply, kept=kept, lyon=lyon, purge=purge, soft=soft, pending=pending, thread=thread
    )


# --- A real Celery worker (marker `worker`) -----------------------------------------


# A failing worker test keeps its workers' logs (the worker's side of the story:
# task ids, retries, exceptions) in test-artifacts/worker-logs/ and shows their tail in the report.
WORKER_LOGS = ROOT / "test-artifacts" / "worker-logs"
WORKER_LOG_TAIL = 20_000
worker_logs_key = pytest.StashKey[list[Path]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    logs = item.stash.get(worker_logs_key, [])
    if report.failed and logs:
        folder = WORKER_LOGS / re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)
        folder.mkdir(parents=True, exist_ok=True)
        for log in logs:
            text = log.read_text(errors="replace")
            (folder / log.name).write_text(text)
            report.sections.append((f"{log.name} ({report.when}), kept in {folder}", text[-WORKER_LOG_TAIL:]))
    return report


@pytest.fixture
def start_worker(request, django_db_blocker, tmp_path):
    """Start a worker with extra environment; tasks sent by this test go to its queue."""
    workers = []
    previous_queue = celery_app.conf.task_default_queue
    request.node.stash[worker_logs_key] = []

    def start(env: dict | None = None, concurrency: int = 2) -> Worker:
        log = tmp_path / f"worker{len(workers)}.log"
        request.node.stash[worker_logs_key].append(log)
        with django_db_blocker.unblock():
            worker = Worker(env=env or {}, concurrency=concurrency, log=log)
        workers.append(worker)
        celery_app.conf.task_default_queue = worker.queue
        return worker

    yield start
    for worker in workers:
        worker.stop()
    celery_app.conf.task_default_queue = previous_queue


# --- Real Chromium (marker `browser`) ---------------------------------------------
# Each page fails its test on any console error or uncaught exception, which
# includes Content-Security-Policy violations. Screenshots go to
# test-artifacts/screenshots/ (ignored by git).

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def chromium():
    chromium_path = django_settings.DELLM_CHROMIUM
    if not Path(chromium_path).exists():
        pytest.fail(f"{chromium_path} is missing: `make test` installs it (apt-get install chromium).")
    # Playwright's sync API runs an event loop in this thread; Django's ORM would
    # refuse to run next to it, although every ORM call here is synchronous.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class BrowserErrors(list):
    def watch(self, page):
        page.on("console", lambda message: message.type == "error" and self.append(f"console: {message.text}"))
        page.on("pageerror", lambda error: self.append(f"pageerror: {error}"))


@pytest.fixture
def open_page(chromium, live_server):
    """`open_page(width=1280)` -> a fresh signed-out page; fails the test on any console error."""
    contexts = []
    errors = BrowserErrors()

    def open_(width: int = 1280, height: int = 860):
        context = chromium.new_context(viewport={"width": width, "height": height}, base_url=live_server.url)
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        errors.watch(page)
        return page

    yield open_
    for context in contexts:
        context.close()
    assert errors == [], "errors in the browser console"


@pytest.fixture
def signed_in(open_page, start_worker, transactional_db):
    """`signed_in(username, worker_env=None)` -> a page signed in as a new user, a worker serving its turns."""

    def open_(username: str, worker_env: dict | None = None):
        make_user(username)
        start_worker(worker_env)
        page = open_page()
        sign_in(page, username)
        return page

    return open_


# --- uvicorn (marker `worker`: a real server process) -------------------------------


@pytest.fixture
def asgi_server(django_db_blocker, tmp_path):
    """`asgi_server(env=None)` -> a uvicorn process serving the app on the test database; stopped afterwards."""
    servers = []

    def start(env: dict | None = None) -> AsgiServer:
        with django_db_blocker.unblock():
            server = AsgiServer(env=env or {}, log=tmp_path / f"uvicorn{len(servers)}.log")
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
