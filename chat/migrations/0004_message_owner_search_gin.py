"""A full-text index per owner for hybrid context retrieval (chat/retrieval/fused.py).

GIN over the search vector plus one token naming the owner ("#<id>"): a
query ANDs that token with its words, so the index returns only that owner's
matches. PostgreSQL has no (owner, search) GIN without the btree_gin
extension, which the embedded server does not ship. `fastupdate = off`: a
pending list makes every scan read it whole (about 1 ms a lexeme after a
burst of inserts, until autovacuum), and retrieval runs on every turn.

Not in the model's Meta: Django cannot express this index, so it lives here
(and `makemigrations --check` has nothing to say about it). On a large live
table, build it by hand first with CREATE INDEX CONCURRENTLY under the same
name; this migration then finds it and does nothing.
"""

from django.db import migrations

INDEX = "message_owner_search_gin"
# Must stay identical to chat.retrieval.terms.OWNER_SEARCH (the planner matches the expression).
OWNER_SEARCH = "(array_to_tsvector(ARRAY['#' || owner_id::text]) || search)"


class Migration(migrations.Migration):
    dependencies = [("chat", "0003_contextedge_signal")]

    operations = [
        migrations.RunSQL(
            sql=f"CREATE INDEX IF NOT EXISTS {INDEX} ON chat_message USING gin ({OWNER_SEARCH}) WITH (fastupdate = off)",
            reverse_sql=f"DROP INDEX IF EXISTS {INDEX}",
        ),
    ]
