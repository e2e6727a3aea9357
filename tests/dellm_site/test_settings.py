import os
import subprocess
import sys

import pytest
from django.db import connection

from tests.factories import make_message


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
        "chat.turns_sweep",
    }
    assert all(entry["task"] in app.tasks for entry in app.conf.beat_schedule.values())
