"""Tool steps through `/v1`: a reply's tool calls, the client's results, the turn that answers them.

`Message.tool_calls` and `Message.tool_call_id` hold the model's words (a
call's name, arguments and id), so, like every text column (0010), they get
statistics target 0: ANALYZE never samples them (provenance/erasure/registry.py).
"""

import django.db.models.deletion
from django.db import migrations, models

STATISTICS = [
    "ALTER TABLE chat_message ALTER COLUMN tool_calls SET STATISTICS {target}",
    "ALTER TABLE chat_message ALTER COLUMN tool_call_id SET STATISTICS {target}",
]


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0010_text_statistics_off"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="tool_call_id",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddField(
            model_name="message",
            name="tool_calls",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="turn",
            name="tool_call",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="chat.message"
            ),
        ),
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
                    ("tool", "Tool"),
                ],
                db_default="",
                default="",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="message",
            name="role",
            field=models.CharField(
                choices=[
                    ("user", "User"),
                    ("assistant", "Assistant"),
                    ("summary", "Summary"),
                    ("system", "System"),
                    ("tool", "Tool"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunSQL([sql.format(target=0) for sql in STATISTICS], [sql.format(target=-1) for sql in STATISTICS]),
    ]
