"""Planner statistics never hold text: every text column and text expression index.

Migration 0002 did the message's content, search vector and embedding. ANALYZE
also samples every other column that can hold text (imported keys, thread
titles, uploads, file names, import errors) and the expression column of
every expression index (`message_owner_search_gin`'s tsvector held a
message's words in `pg_stats.most_common_elems`; each per-owner IVFFlat
index's vector cast too). Statistics target 0 makes ANALYZE skip them
(`ALTER INDEX ... ALTER COLUMN 1` for an index's expression); the registry
in provenance/erasure/registry.py lists the places, and
tests/provenance/erasure/test_erasure.py fails if one gets statistics. Existing
statistics are removed where the role may (a superuser); elsewhere an
operator runs the DELETE below as a superuser, as for 0002.
"""

from django.db import migrations

COLUMNS = {
    "chat_message": ("source_id",),
    "chat_thread": ("title", "source_id"),
    "chat_importjob": ("filename", "errors"),
    "chat_importupload": ("data",),
}
INDEX = "message_owner_search_gin"
# Per-owner vector indexes (chat/index/vectors.py) built before this migration; new ones are set at creation.
VECTOR_INDEXES = "message_ivf_owner_%"


def _columns(target: int) -> list[str]:
    return [
        f"ALTER TABLE {table} ALTER COLUMN {column} SET STATISTICS {target}"
        for table, columns in COLUMNS.items()
        for column in columns
    ]


def _indexes(target: int) -> list[str]:
    return [
        f"ALTER INDEX {INDEX} ALTER COLUMN 1 SET STATISTICS {target}",
        f"""
        DO $$
        DECLARE name text;
        BEGIN
            FOR name IN SELECT indexname FROM pg_indexes WHERE indexname LIKE '{VECTOR_INDEXES}' LOOP
                EXECUTE format('ALTER INDEX %I ALTER COLUMN 1 SET STATISTICS {target}', name);
            END LOOP;
        END
        $$
        """,
    ]


_FORGET = """
DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        DELETE FROM pg_statistic s USING pg_attribute a
        WHERE a.attrelid = s.starelid AND a.attnum = s.staattnum AND a.attstattarget = 0
          AND s.starelid IN (
              SELECT c.oid FROM pg_class c
              WHERE c.relname IN ('chat_message', 'chat_thread', 'chat_importjob', 'chat_importupload')
                 OR c.relname = 'message_owner_search_gin' OR c.relname LIKE 'message_ivf_owner_%'
          );
    END IF;
END
$$
"""


class Migration(migrations.Migration):
    dependencies = [("chat", "0009_system_prompt_node")]

    operations = [migrations.RunSQL(_columns(0) + _indexes(0) + [_FORGET], _columns(-1) + _indexes(-1))]
