"""Planner statistics never hold message text.

ANALYZE samples column values into pg_statistic (most common values,
histogram bounds, most common tsvector elements), readable through pg_stats
and kept until the next ANALYZE: a copy of message text outside the rows a
purge overwrites. With statistics target 0, ANALYZE skips these columns; the
planner falls back to default selectivities for them (DeLLM never filters on
their values except full-text search and ILIKE, both owner-scoped).
Statistics gathered before this migration are removed where the role may
(a superuser, as the embedded server's is); elsewhere they go at the next
`ANALYZE` after an operator runs the DELETE below as a superuser.
"""

from django.db import migrations

COLUMNS = ("content", "search", "embedding")

FORWARD = [f"ALTER TABLE chat_message ALTER COLUMN {column} SET STATISTICS 0" for column in COLUMNS] + [
    """
    DO $$
    BEGIN
        IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
            DELETE FROM pg_statistic
            WHERE starelid = 'chat_message'::regclass
              AND staattnum IN (
                  SELECT attnum FROM pg_attribute
                  WHERE attrelid = 'chat_message'::regclass AND attname IN ('content', 'search', 'embedding')
              );
        END IF;
    END
    $$
    """
]
BACKWARD = [f"ALTER TABLE chat_message ALTER COLUMN {column} SET STATISTICS -1" for column in COLUMNS]


class Migration(migrations.Migration):
    dependencies = [("chat", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
