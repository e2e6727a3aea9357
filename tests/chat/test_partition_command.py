"""`manage.py dellm_partition`: the partitioning of the per-owner tables, and converting a table that is not."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from chat.partitions import is_partitioned, unpartition_table
from provenance.models import DeletionRequest


def run(*args: str) -> str:
    out = StringIO()
    call_command("dellm_partition", *args, stdout=out)
    return out.getvalue()


def test_status_lists_each_table_and_its_partitions(db, settings):
    lines = run("--status").splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "chat_thread",
        "chat_message",
        "chat_turn",
        "chat_contextedge",
        "provenance_deletionrequest",
    ]
    assert all(f": {settings.DELLM_PARTITIONS} hash partitions by owner_id" in line for line in lines)


def test_convert_partitions_a_table_that_is_not_with_progress(owner):
    deletion = DeletionRequest.objects.create(owner=owner, actor=owner, selector="ids", mode="soft")
    with connection.cursor() as cursor:
        # Deferred foreign-key checks pending in this transaction would forbid the ALTER TABLEs.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        unpartition_table(cursor, table="provenance_deletionrequest", report=lambda line: None)
    assert not is_partitioned("provenance_deletionrequest")

    out = run("--convert", "--partitions", "3", "--batch", "1")

    assert "chat_message: already partitioned" in out
    assert "provenance_deletionrequest: 1/1 rows copied" in out
    assert "provenance_deletionrequest: 3 hash partitions by owner_id" in out
    assert DeletionRequest.objects.get(owner=owner, pk=deletion.pk).actor_id == owner.pk


def test_convert_refuses_bad_numbers(db):
    with pytest.raises(CommandError):
        run("--convert", "--partitions", "0")
