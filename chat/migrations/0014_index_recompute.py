"""Data: every existing message's index from its conversational context (see 0013), in batches.

A frozen copy of `chat.index.context.INDEX_ROWS_SQL` and of the writer's
update (a migration must not change when the code does). Vectors are not
recomputed here (that needs the embedder): `manage.py reembed` embeds every
message's index text; until then a message keeps its content's vector.
"""

from django.db import migrations

BATCH = 5000
WORDS = 12
MEMORY = ["user", "assistant", "summary", "note"]
LIVE = ["active", "expiring"]

MEMORY_LIVE = "q.status = ANY(%(live)s) AND q.role = ANY(%(memory)s) AND q.content <> '' AND q.tool_calls IS NULL"

SQL = (
    """
WITH c AS MATERIALIZED (
    SELECT m.id,
           CASE WHEN p.id IS NULL THEN ARRAY[]::bigint[] ELSE ARRAY[p.id] END AS sources,
           CASE WHEN m.role = ANY(%(memory)s) AND m.content <> '' AND m.tool_calls IS NULL THEN concat_ws(' ',
               m.role,
               to_char(coalesce(m.source_created_at, m.created_at) AT TIME ZONE 'UTC', 'FMDD FMMonth YYYY'),
               p.words
           ) ELSE '' END AS context
    FROM chat_message m
    LEFT JOIN LATERAL (
        SELECT cand.id, array_to_string((regexp_split_to_array(btrim(cand.content), '\\s+'))[1:%(words)s], ' ') AS words
        FROM (
            (SELECT q.id, q.content, q.seq AS k1, q.seq AS k2 FROM chat_message q
             WHERE q.thread_id = m.thread_id AND q.place IS NULL AND """
    + MEMORY_LIVE
    + """
               AND q.seq <= coalesce(m.place, m.seq) AND (q.seq < coalesce(m.place, m.seq) OR m.place IS NOT NULL)
             ORDER BY q.seq DESC LIMIT 1)
            UNION ALL
            (SELECT q.id, q.content, q.place, q.seq FROM chat_message q
             WHERE q.thread_id = m.thread_id AND q.place IS NOT NULL AND """
    + MEMORY_LIVE
    + """
               AND (q.place, q.seq) < (coalesce(m.place, m.seq), m.seq)
             ORDER BY q.place DESC, q.seq DESC LIMIT 1)
        ) cand
        ORDER BY cand.k1 DESC, cand.k2 DESC
        LIMIT 1
    ) p ON m.role = ANY(%(memory)s) AND m.content <> '' AND m.tool_calls IS NULL
    WHERE m.id > %(after)s AND m.id <= %(upto)s AND m.status <> 'purged'
)
UPDATE chat_message AS m
SET search = setweight(to_tsvector('english', m.content), 'A') || setweight(to_tsvector('english', c.context), 'B'),
    index_sources = c.sources
FROM c WHERE m.id = c.id
"""
)


def recompute(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("UPDATE chat_message SET search = NULL WHERE status = 'purged' AND search IS NOT NULL")
        cursor.execute("SELECT coalesce(max(id), 0) FROM chat_message")
        top = cursor.fetchone()[0]
        for after in range(0, top, BATCH):
            cursor.execute(SQL, {"after": after, "upto": after + BATCH, "memory": MEMORY, "live": LIVE, "words": WORDS})


class Migration(migrations.Migration):
    dependencies = [("chat", "0013_index_sources")]

    operations = [migrations.RunPython(recompute, migrations.RunPython.noop)]
