"""Fewer index writes per message row: a removal's recompute rewrites every neighbour's row.

A purge of 10,000 messages rewrites the 9,500 rows whose index held one of
them (chat.writer.indexes), and an UPDATE that changes an indexed column
writes an entry in every index of the table (lab/HISTORY.md has the profile):

- `message_owner_search_gin` gets a pending list of at most 64 kB
  (`fastupdate = on, gin_pending_list_limit = 64`): the rewritten rows'
  entries are merged in sorted batches, not one lexeme at a time. Every
  scan reads the list whole, so it is kept small: 8 pages. Migration 0004's
  "no pending list" was about the default 4 MB, which a burst of turns
  filled until autovacuum (about 1 ms a lexeme). A purge's entries in the
  list go with the scrub's REINDEX of the partition like the rest of the
  index (provenance/erasure/registry.py).
- `deleted_by_id` is indexed only where it is set (`message_deleted_by`):
  live rows, the recompute's and every new message's, write no entry.
- `owner_id` and `thread_id` lose the indexes Django gave their foreign
  keys: the primary key (owner_id, id) and `message_thread_seq` (thread_id,
  seq) lead with them and serve the same look-ups. The foreign key
  constraint on owner_id stays as it is (only its index goes).

Each index is rebuilt on every partition (an index of a partitioned table
recurses), in the migration's transaction, which holds chat_message
exclusively until it commits: about 1.1 s per 200,000 messages on a 2-core
machine (docs/DEPLOYMENT.md, "Partitions").
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

INDEX = "message_owner_search_gin"
# chat.retrieval.terms.OWNER_SEARCH (migration 0004).
OWNER_SEARCH = "(array_to_tsvector(ARRAY['#' || owner_id::text]) || search)"


def _owner_search_gin(options: str) -> list[str]:
    return [
        f"DROP INDEX IF EXISTS {INDEX}",
        f"CREATE INDEX {INDEX} ON chat_message USING gin ({OWNER_SEARCH}) WITH ({options})",
        # Planner statistics never hold text (migration 0010).
        f"ALTER INDEX {INDEX} ALTER COLUMN 1 SET STATISTICS 0",
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0018_index_sources_gin_direct"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunSQL(
            _owner_search_gin("fastupdate = on, gin_pending_list_limit = 64"),
            _owner_search_gin("fastupdate = off"),
        ),
        migrations.AlterField(
            model_name="message",
            name="deleted_by_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("deleted_by_id__isnull", False)),
                fields=["deleted_by_id"],
                name="message_deleted_by",
            ),
        ),
        # Django would drop and re-add (and so re-validate) the foreign key to change its index alone.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "chat_message_owner_id_20a4d94c"',
                    'CREATE INDEX "chat_message_owner_id_20a4d94c" ON "chat_message" ("owner_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="owner",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.AlterField(
            model_name="message",
            name="thread",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="messages",
                to="chat.thread",
            ),
        ),
    ]
