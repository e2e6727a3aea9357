import subprocess

import pytest
from django.db import connection
from pgserver._commands import POSTGRES_BIN_PATH

from chat import services as chat
from provenance import services

SECRET = "my locker code is 918273"
KEPT = "I enjoy long walks on the beach"


def pg_dump() -> str:
    db = connection.settings_dict
    command = [str(POSTGRES_BIN_PATH / "pg_dump"), "--no-owner", "-d", db["NAME"], "-U", db["USER"] or "postgres"]
    if db["HOST"]:
        command += ["-h", db["HOST"]]
    if db["PORT"]:
        command += ["-p", str(db["PORT"])]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.mark.django_db(transaction=True)
def test_purge_leaves_no_trace_in_pg_dump(owner, thread):
    for text in [SECRET, KEPT, "What is my locker code?", "Remind me of my locker code"]:
        turn = chat.turn_create(thread=thread, content=text, enqueue=False)
        chat.turn_run(turn_id=turn.pk)
    dump = pg_dump()
    assert dump.count("918273") >= 3  # the secret flowed into replies: the test can see it

    preview = services.deletion_preview(owner=owner, actor=owner, exact="918273", mode="purge")
    services.deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    dump = pg_dump()
    assert "918273" not in dump
    assert "locker code is" not in dump
    assert KEPT in dump
