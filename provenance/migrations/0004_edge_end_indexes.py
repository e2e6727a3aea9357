# The unique (source, target) index already serves lookups by source, and
# `edge_target` those by target: drop the two single-column indexes Django
# made for the foreign keys. Only the indexes go; AlterField alone would also
# drop and re-add both foreign keys, re-checking every edge under locks.

import django.db.models.deletion
from django.db import migrations, models

INDEXES = {
    "source": "provenance_contextedge_source_id_8b72ad8d",
    "target": "provenance_contextedge_target_id_d6584dc8",
}


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0003_owner_links"),
        ("provenance", "0003_run_subject_deletion_permission"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="contextedge",
                    name="source",
                    field=models.ForeignKey(
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
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="in_edges",
                        to="chat.message",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f"DROP INDEX IF EXISTS {name}",
                    reverse_sql=f"CREATE INDEX IF NOT EXISTS {name} ON provenance_contextedge ({column}_id)",
                )
                for column, name in INDEXES.items()
            ],
        ),
    ]
