"""The embedding column loses its fixed dimension, so any embedder fits (chat/index/embeddings.py).

Each row says its model (`embedding_model`) and vectors are compared only
within one model. Approximate indexes need a dimension, so they become
expression indexes with an explicit cast per owner and model
(chat/index/vectors.py); the per-owner IVFFlat indexes built on the old
fixed-dimension column are dropped first (ALTER COLUMN cannot rebuild them
on a dimensionless column) and `manage.py dellm_vector_indexes` (or the
periodic task) builds their replacements.
"""

import pgvector.django.vector
from django.db import migrations

DROP_OWNER_INDEXES = """
DO $$
DECLARE name text;
BEGIN
    FOR name IN SELECT indexname FROM pg_indexes
                WHERE tablename = 'chat_message' AND indexname LIKE 'message\\_ivf\\_owner\\_%'
    LOOP
        EXECUTE format('DROP INDEX IF EXISTS %I', name);
    END LOOP;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("chat", "0006_message_rewrites_and_regeneration_turns")]

    operations = [
        migrations.RunSQL(sql=DROP_OWNER_INDEXES, reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="message",
            name="embedding",
            field=pgvector.django.vector.VectorField(blank=True, null=True),
        ),
    ]
