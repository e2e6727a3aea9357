"""Partition chat_thread by owner too, as chat 0015 did the message tables.

Its keys already name the owner but its primary key (`id`): the rebuild
makes it `(owner_id, id)` in `settings.DELLM_PARTITIONS` hash partitions
`chat_thread_p<remainder>`, rows copied in batches with progress printed.
The message's foreign key to its thread becomes `db_constraint=False` in
Django and `(owner_id, thread_id) REFERENCES chat_thread (owner_id, id)` in
the database, so a message can only be in a thread of its own owner. Then
every per-owner table is distributable on Citus, colocated by owner
(docs/SCALING.md), and a thread's title and import key live in the owner's
partition, which is all the eraser's upkeep touches.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from chat.partitions import owner_foreign_keys_add, owner_foreign_keys_drop, partition_table, unpartition_table


def forward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        partition_table(cursor, table="chat_thread", partitions=settings.DELLM_PARTITIONS)
        owner_foreign_keys_add(cursor, models=[apps.get_model("chat", "Message")])


def backward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        owner_foreign_keys_drop(cursor, models=[apps.get_model("chat", "Message")])
        unpartition_table(cursor, table="chat_thread")


class Migration(migrations.Migration):
    dependencies = [("chat", "0016_import_upload_storage_external")]

    operations = [
        migrations.AlterField(
            model_name="message",
            name="thread",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="messages",
                to="chat.thread",
            ),
        ),
        migrations.RunPython(forward, backward, elidable=False),
    ]
