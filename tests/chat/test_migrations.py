"""Migrations: chat depends on nothing but Django (the layering rule); 0015 and 0017 partition by owner."""

import itertools

import pytest
from django.apps import apps
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from chat.models import ContextEdge, Message, Thread

# What chat may depend on: itself and Django's own apps (the user model).
ALLOWED = {"chat", "auth", "contenttypes", "__setting__"}


def test_chat_migrations_depend_only_on_chat_and_django():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    outside = sorted(
        (name, dependency)
        for (app, name), migration in loader.disk_migrations.items()
        if app == "chat"
        for dependency, _ in migration.dependencies
        if dependency not in ALLOWED
    )
    assert outside == []


def test_chat_models_relate_only_to_chat_and_django():
    outside = sorted(
        (model.__name__, field.name, field.related_model._meta.app_label)
        for model in apps.get_app_config("chat").get_models()
        for field in model._meta.get_fields()
        if field.is_relation and not field.auto_created and field.related_model is not None
        if field.related_model._meta.app_label not in ALLOWED
    )
    assert outside == []


# --- Migrations chat 0015, 0017 / provenance 0004: an installation's tables become hash partitions by owner ---

BEFORE = [("chat", "0014_index_recompute"), ("provenance", "0003_deletion_scrubbed_at")]
PARTITIONED = ("chat_thread", "chat_message", "chat_contextedge", "chat_turn", "provenance_deletionrequest")


def _rows(table: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} ORDER BY id")
        return cursor.fetchall()


def _populate_old_schema(apps) -> list[int]:
    """Three owners' messages, edges, turns and deletions, written through the 0014 models; returns the owners."""
    User = apps.get_model("auth", "User")
    Thread, Message = apps.get_model("chat", "Thread"), apps.get_model("chat", "Message")
    Edge, Turn = apps.get_model("chat", "ContextEdge"), apps.get_model("chat", "Turn")
    Deletion = apps.get_model("provenance", "DeletionRequest")
    owners = []
    for n in range(3):
        user = User.objects.create(username=f"migrated{n}")
        thread = Thread.objects.create(owner=user, title=f"thread {n}")
        messages = [
            Message.objects.create(
                owner=user, thread=thread, seq=seq, role="user" if seq % 2 else "assistant", content=f"words {n} {seq}"
            )
            for seq in range(1, 8)
        ]
        for source, target in itertools.pairwise(messages):
            Edge.objects.create(owner=user, source=source, target=target, rank=1, score=0.5)
        Turn.objects.create(owner=user, user_message=messages[0], reply=messages[1], status="done")
        Deletion.objects.create(owner=user, actor=user, selector="ids", mode="soft", matched_ids=[messages[2].pk])
        owners.append(user.pk)
    return owners


def test_partition_migration_converts_a_populated_installation(db, capsys):
    from chat.partitions import is_partitioned, partition_of

    with connection.cursor() as cursor:
        # Deferred foreign-key checks pending in this transaction would forbid the ALTER TABLEs.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    assert not any(is_partitioned(table) for table in PARTITIONED)
    owners = _populate_old_schema(executor.loader.project_state(BEFORE).apps)
    with connection.cursor() as cursor:
        # What another engineer's earlier migration may add: the copy must carry it without naming it.
        cursor.execute("ALTER TABLE chat_message ADD COLUMN later_note text NOT NULL DEFAULT 'n'")
        cursor.execute("CREATE INDEX message_later_note ON chat_message (owner_id, later_note)")
        # A per-owner partial index (as chat/index/vectors.py builds) with its statistics off.
        cursor.execute(f"CREATE INDEX message_owner_probe ON chat_message (seq) WHERE owner_id = {owners[1]}")
        cursor.execute("ALTER INDEX message_owner_search_gin ALTER COLUMN 1 SET STATISTICS 0")
    before = {table: _rows(table) for table in PARTITIONED}
    with connection.cursor() as cursor:
        cursor.execute("SELECT last_value FROM chat_message_id_seq")
        last_id = cursor.fetchone()[0]

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert all(is_partitioned(table) for table in PARTITIONED)
    # Every row as it was; columns later migrations add (new deletion fields) come after the old ones.
    after = {table: [row[: len(before[table][0])] for row in _rows(table)] for table in PARTITIONED}
    assert after == before
    assert "chat_message: 21/21 rows copied" in capsys.readouterr().out
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = ANY(%s::regclass[]) AND contype IN ('p', 'u', 'f') AND conparentid = 0 ORDER BY 1, 2",
            [list(PARTITIONED)],
        )
        keys = cursor.fetchall()
        cursor.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'chat_message'::regclass",
        )
        partitions = cursor.fetchone()[0]
        cursor.execute(
            "SELECT indrelid::regclass::text FROM pg_index WHERE indexrelid = 'message_owner_probe'::regclass"
        )
        probe_on = cursor.fetchone()[0]
        cursor.execute(
            "SELECT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent = 'chat_message'::regclass "
            "AND a.attname = 'content' AND a.attstattarget <> 0"
        )
        sampled = cursor.fetchall()
        cursor.execute(
            "SELECT count(*) FROM pg_inherits i JOIN pg_attribute a ON a.attrelid = i.inhrelid "
            "WHERE i.inhparent = 'message_owner_search_gin'::regclass AND a.attstattarget = 0"
        )
        gin_children_off = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'message_later_note'::regclass"
        )
        later_note_children = cursor.fetchone()[0]
    assert partitions == settings.DELLM_PARTITIONS
    assert later_note_children == settings.DELLM_PARTITIONS
    assert gin_children_off == settings.DELLM_PARTITIONS
    assert probe_on == partition_of(table="chat_message", owner_id=owners[1])
    assert sampled == []
    assert [key for table, key in keys if key.startswith("PRIMARY")] == ["PRIMARY KEY (owner_id, id)"] * 5
    assert [key for table, key in keys if not key.startswith("PRIMARY") and "auth_user" not in key] == [
        "FOREIGN KEY (owner_id, source_id) REFERENCES chat_message(owner_id, id) DEFERRABLE INITIALLY DEFERRED",
        "FOREIGN KEY (owner_id, target_id) REFERENCES chat_message(owner_id, id) DEFERRABLE INITIALLY DEFERRED",
        "UNIQUE (owner_id, source_id, target_id)",
        "FOREIGN KEY (owner_id, thread_id) REFERENCES chat_thread(owner_id, id) DEFERRABLE INITIALLY DEFERRED",
        "UNIQUE (owner_id, seq)",
        "FOREIGN KEY (owner_id, reply_id) REFERENCES chat_message(owner_id, id) DEFERRABLE INITIALLY DEFERRED",
        "FOREIGN KEY (owner_id, system_message_id) REFERENCES chat_message(owner_id, id) DEFERRABLE INITIALLY DEFERRED",
        "FOREIGN KEY (owner_id, tool_call_id) REFERENCES chat_message(owner_id, id) DEFERRABLE INITIALLY DEFERRED",
        "FOREIGN KEY (owner_id, user_message_id) REFERENCES chat_message(owner_id, id) DEFERRABLE INITIALLY DEFERRED",
    ]
    # The sequence goes on from where it was; an edge between two owners' messages, or a message in another
    # owner's thread, is refused.
    thread = Thread.objects.filter(owner_id=owners[0]).get()
    fresh = Message.objects.create(owner_id=owners[0], thread=thread, seq=99, role="user", content="after")
    assert fresh.pk == last_id + 1
    stranger = Message.objects.filter(owner_id=owners[2]).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        ContextEdge.objects.create(owner_id=owners[0], source=stranger, target=fresh, rank=1, score=0.5)
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(owner_id=owners[0], thread=stranger.thread, seq=100, role="user", content="astray")
