import asyncio
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import AsyncClient, Client

from tests.factories import make_message
from tests.helpers import ROOT


@pytest.mark.django_db(transaction=True)
def test_dbshell_reaches_the_same_server(owner, thread):
    make_message(thread, "I live in Paris")
    db = connection.settings_dict
    result = subprocess.run(
        [sys.executable, "manage.py", "dbshell", "--", "-tAc", "select count(*) from chat_message"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DATABASE_URL": f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


def test_beat_schedules_registered_tasks_only():
    from dellm_site.celery import app

    app.loader.import_default_modules()
    assert {entry["task"] for entry in app.conf.beat_schedule.values()} == {
        "provenance.deletions_fire_due",
        "chat.vector_indexes_sync",
        "provenance.erasure_scrub",
        "provenance.erasure_vacuum_sweep",
        "chat.turns_sweep",
        "provenance.regenerations_sweep",
        "chat.imports_sweep",
        "provenance.receipts_sweep",
    }
    assert all(entry["task"] in app.tasks for entry in app.conf.beat_schedule.values())


def test_every_subsystem_tasks_module_is_discovered_under_its_stable_names():
    from dellm_site.celery import TASK_PACKAGES, app

    folders = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for package in ("core", "chat", "provenance", "assistant")
        for path in (ROOT / package).rglob("tasks.py")
    }
    assert sorted(TASK_PACKAGES) == sorted(folders)
    app.loader.import_default_modules()
    assert sorted(name for name in app.tasks if not name.startswith("celery.")) == [
        "chat.facts_extract",
        "chat.facts_rederive",
        "chat.import_run",
        "chat.imports_sweep",
        "chat.thread_title",
        "chat.turn_run",
        "chat.turns_sweep",
        "chat.vector_indexes_sync",
        "provenance.deletion_fire",
        "provenance.deletions_fire_due",
        "provenance.erasure_scrub",
        "provenance.erasure_vacuum",
        "provenance.erasure_vacuum_sweep",
        "provenance.receipts_sweep",
        "provenance.regeneration_run",
        "provenance.regenerations_sweep",
    ]


def test_worker_children_get_the_worker_pool_size(settings, monkeypatch):
    from dellm_site.celery import _worker_pool_size

    pool = {"min_size": 4, "max_size": 20, "timeout": 5.0}
    monkeypatch.setitem(settings.DATABASES["default"].setdefault("OPTIONS", {}), "pool", pool)
    settings.DELLM_WORKER_DB_POOL_MAX = 2

    _worker_pool_size()

    assert pool == {"min_size": 2, "max_size": 2, "timeout": 5.0}


def test_redis_prefix_defaults_to_a_digest_of_the_database_and_is_exported(monkeypatch):
    from core.redis_ns import instance_prefix

    monkeypatch.delenv("DELLM_REDIS_PREFIX", raising=False)
    one = instance_prefix({"HOST": "/tmp/a", "PORT": "", "NAME": "dellm"})
    assert os.environ["DELLM_REDIS_PREFIX"] == one
    monkeypatch.delenv("DELLM_REDIS_PREFIX")
    other = instance_prefix({"HOST": "/tmp/b", "PORT": "", "NAME": "dellm"})
    monkeypatch.setenv("DELLM_REDIS_PREFIX", "dellm-prod")

    assert one.startswith("dellm-") and other.startswith("dellm-") and one != other
    assert instance_prefix({"HOST": "/tmp/a", "NAME": "dellm"}) == "dellm-prod"


def test_every_middleware_is_async_capable(settings):
    """One sync-only middleware puts every async view on a waiting thread (core/middleware.py)."""
    from django.utils.module_loading import import_string

    sync_only = [path for path in settings.MIDDLEWARE if not getattr(import_string(path), "async_capable", False)]
    assert sync_only == []


@pytest.mark.parametrize("client_class", [Client, AsyncClient])
def test_static_files_are_served_on_either_path(settings, client_class):
    """The async path of StaticFilesMiddleware serves what WhiteNoise's sync one does, and passes the rest on."""
    settings.WHITENOISE_AUTOREFRESH = True  # read at start-up: a fresh client builds a fresh middleware chain
    settings.WHITENOISE_USE_FINDERS = True
    client = client_class()

    def answer(path: str):
        if client_class is AsyncClient:

            async def get():
                return await client.get(path)

            # On a thread of its own: an earlier test of the suite may have left this one's event loop set.
            with ThreadPoolExecutor(1) as pool:
                return pool.submit(asyncio.run, get()).result()
        return client.get(path)

    css = answer("/static/css/app.css")
    assert css.status_code == 200
    assert b"".join(css.streaming_content) == (settings.BASE_DIR / "frontend/static/css/app.css").read_bytes()
    assert answer("/accounts/login/").status_code == 200
