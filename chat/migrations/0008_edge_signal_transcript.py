"""ContextEdge.signal: `transcript` (a supplied reply's linear edges, chat/lineage.py) and `system` (the system prompt's edge); 16 characters."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0007_message_embedding_any_dimension"),
    ]

    operations = [
        migrations.AlterField(
            model_name="contextedge",
            name="signal",
            field=models.CharField(
                blank=True,
                choices=[
                    ("vector", "Vector"),
                    ("lexical", "Lexical"),
                    ("both", "Both"),
                    ("transcript", "Transcript"),
                    ("system", "System"),
                ],
                db_default="",
                default="",
                max_length=16,
            ),
        ),
    ]
