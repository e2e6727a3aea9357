"""Partition the per-owner chat tables by owner: hash partitions of chat_message, chat_contextedge, chat_turn.

Every unique key gains `owner_id` first (PostgreSQL requires the partition
key in each), Django's foreign keys to chat_message become
`db_constraint=False`, and then each table is rebuilt from its own catalog
definition (chat.partitions.partition_table: columns, defaults, generated
columns, identity, statistics targets, indexes, constraints) into
`settings.DELLM_PARTITIONS` partitions `<table>_p<remainder>`, its rows
copied in batches with progress printed. Last, the composite foreign keys
`(owner_id, x_id) REFERENCES chat_message (owner_id, id)` that Django cannot
declare. provenance 0003 does the same for provenance_deletionrequest.

One transaction, like every migration here: on a large installation it holds
the tables for the copy. docs/DEPLOYMENT.md ("Partitions") says how to run it
(and `manage.py dellm_partition --status` what it did).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from chat.partitions import owner_foreign_keys_add, owner_foreign_keys_drop, partition_table, unpartition_table

# Referenced tables before the tables that reference them.
TABLES = ("chat_message", "chat_turn", "chat_contextedge")


def forward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for table in TABLES:
            partition_table(cursor, table=table, partitions=settings.DELLM_PARTITIONS)
        owner_foreign_keys_add(cursor, models=[apps.get_model("chat", name) for name in ("Turn", "ContextEdge")])


def backward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        owner_foreign_keys_drop(cursor, models=[apps.get_model("chat", name) for name in ("Turn", "ContextEdge")])
        for table in reversed(TABLES):
            unpartition_table(cursor, table=table)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0014_index_recompute"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="contextedge", name="edge_source_target_unique"),
        migrations.RemoveConstraint(model_name="message", name="message_thread_source_unique"),
        migrations.AlterField(
            model_name="contextedge",
            name="source",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="out_edges",
                to="chat.message",
            ),
        ),
        migrations.AlterField(
            model_name="contextedge",
            name="target",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="in_edges",
                to="chat.message",
            ),
        ),
        migrations.AlterField(
            model_name="turn",
            name="reply",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="chat.message",
            ),
        ),
        migrations.AlterField(
            model_name="turn",
            name="system_message",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="chat.message",
            ),
        ),
        migrations.AlterField(
            model_name="turn",
            name="tool_call",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="chat.message",
            ),
        ),
        migrations.AlterField(
            model_name="turn",
            name="user_message",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="turns",
                to="chat.message",
            ),
        ),
        migrations.AddConstraint(
            model_name="contextedge",
            constraint=models.UniqueConstraint(fields=("owner", "source", "target"), name="edge_source_target_unique"),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                condition=models.Q(("source_id", ""), _negated=True),
                fields=("owner", "thread", "source_id"),
                name="message_thread_source_unique",
            ),
        ),
        migrations.RunPython(forward, backward, elidable=False),
    ]
