"""Partition provenance_deletionrequest by owner, as chat 0013 does the chat tables.

Nothing references a deletion by a foreign key (messages keep its id in a
plain column), and its foreign keys point at the user table only, so its
keys need nothing but the primary key becoming (owner_id, id).
"""

from django.conf import settings
from django.db import migrations

from chat.partitions import partition_table, unpartition_table

TABLE = "provenance_deletionrequest"


def forward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        partition_table(cursor, table=TABLE, partitions=settings.DELLM_PARTITIONS)


def backward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        unpartition_table(cursor, table=TABLE)


class Migration(migrations.Migration):
    dependencies = [("provenance", "0003_deletion_scrubbed_at"), ("chat", "0015_partition_by_owner")]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
