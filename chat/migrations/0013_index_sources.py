"""A message's index is derived from its conversational context (chat/index/context.py).

`search` stops being generated from `content`: the writer sets it, own words
weighted 'A' and the context (speaker, date, the previous turn's first words)
'B' (`DROP EXPRESSION` keeps its values, its GIN indexes and its statistics
target of 0). `index_sources` records the ids of the messages whose words a
message's index carries (GIN, for the deletion's lookup of the indexes built
from what it removes), and `message_thread_place` (the rewrites shown at
another's place) finds, with `message_thread_seq`, a message's previous turn
in the order its thread shows. Migration 0014 computes the indexes of
existing rows.
"""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

# Back to a column generated from the content alone (the two GIN indexes over it go with the old column).
REVERSE = [
    "ALTER TABLE chat_message DROP COLUMN search",
    "ALTER TABLE chat_message ADD COLUMN search tsvector GENERATED ALWAYS AS "
    "(to_tsvector('english'::regconfig, COALESCE(content, ''))) STORED",
    "ALTER TABLE chat_message ALTER COLUMN search SET STATISTICS 0",
    "CREATE INDEX message_search_gin ON chat_message USING gin (search)",
    "CREATE INDEX message_owner_search_gin ON chat_message USING gin "
    "((array_to_tsvector(ARRAY['#' || owner_id::text]) || search)) WITH (fastupdate = off)",
    "ALTER INDEX message_owner_search_gin ALTER COLUMN 1 SET STATISTICS 0",
]


class Migration(migrations.Migration):
    dependencies = [("chat", "0012_agent_notes_and_reads")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL("ALTER TABLE chat_message ALTER COLUMN search DROP EXPRESSION", REVERSE),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="message", name="message_search_gin"),
                migrations.RemoveField(model_name="message", name="search"),
                migrations.AddField(
                    model_name="message",
                    name="search",
                    field=django.contrib.postgres.search.SearchVectorField(blank=True, null=True),
                ),
                migrations.AddIndex(
                    model_name="message",
                    index=django.contrib.postgres.indexes.GinIndex(fields=["search"], name="message_search_gin"),
                ),
            ],
        ),
        migrations.AddField(
            model_name="message",
            name="index_sources",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(), blank=True, db_default="{}", default=list, size=None
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=django.contrib.postgres.indexes.GinIndex(fields=["index_sources"], name="message_index_sources_gin"),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("place__isnull", False)),
                fields=["thread", "place", "seq"],
                name="message_thread_place",
            ),
        ),
    ]
