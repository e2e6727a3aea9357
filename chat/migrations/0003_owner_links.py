import django.contrib.postgres.indexes
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("chat", "0002_message_thread_turn"),
        ("provenance", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="deleted_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="removed_messages",
                to="provenance.deletionrequest",
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="owner",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="messages", to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddField(
            model_name="thread",
            name="owner",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="threads", to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="thread",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="messages", to="chat.thread"
            ),
        ),
        migrations.AddField(
            model_name="turn",
            name="owner",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="turns", to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddField(
            model_name="turn",
            name="reply",
            field=models.ForeignKey(
                blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="chat.message"
            ),
        ),
        migrations.AddField(
            model_name="turn",
            name="user_message",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="turns", to="chat.message"
            ),
        ),
        migrations.AddIndex(
            model_name="thread",
            index=models.Index(fields=["owner", "-updated_at"], name="thread_owner_recent"),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(fields=["owner", "status", "seq"], name="message_owner_status_seq"),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(fields=["thread", "seq"], name="message_thread_seq"),
        ),
        migrations.AddIndex(
            model_name="message",
            index=django.contrib.postgres.indexes.GinIndex(fields=["search"], name="message_search_gin"),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(fields=("owner", "seq"), name="message_owner_seq_unique"),
        ),
        migrations.AddIndex(
            model_name="turn",
            index=models.Index(fields=["owner", "status"], name="turn_owner_status"),
        ),
    ]
