import os
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.db import connection

from chat.models import Message
from tests.factories import make_message


def test_reembed_fills_vectors_for_messages_with_content(owner, thread):
    live = make_message(thread, "I live in Paris")
    deleted = make_message(thread, "I like tea", status="deleted")
    purged = make_message(thread, "", status="purged")
    call_command("reembed")
    rows = {m.pk: m for m in Message.objects.filter(owner=owner)}
    assert len(rows[live.pk].embedding) == 256
    assert len(rows[deleted.pk].embedding) == 256
    assert rows[purged.pk].embedding is None
    assert rows[live.pk].embedding_model == "wordllama-l2_supercat-256"


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
    }
    assert all(entry["task"] in app.tasks for entry in app.conf.beat_schedule.values())


def test_vector_index_sync_task_logs_counts_only(db, caplog):
    from chat import tasks

    with caplog.at_level("INFO", logger="chat.tasks"):
        tasks.vector_indexes_sync.delay()
    assert "vector indexes: 0 created, 0 rebuilt, 0 dropped" in caplog.messages
