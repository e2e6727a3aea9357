"""A `/v1` system prompt is a stored node: Message.Role.SYSTEM and the Turn that records which one shaped its reply."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0008_edge_signal_transcript"),
    ]

    operations = [
        migrations.AlterField(
            model_name="message",
            name="role",
            field=models.CharField(
                choices=[("user", "User"), ("assistant", "Assistant"), ("summary", "Summary"), ("system", "System")],
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="turn",
            name="system_message",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="chat.message",
            ),
        ),
    ]
