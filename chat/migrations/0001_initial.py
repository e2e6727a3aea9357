# The whole chat schema, squashed (layout-v2: no deployed data to carry).
# The vector extension comes first: the Message table needs its type.

import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
import pgvector.django.vector
from django.conf import settings
from django.db import migrations, models
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        VectorExtension(),
        migrations.CreateModel(
            name="Thread",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("title", models.CharField(blank=True, default="", max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="threads", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            options={
                "ordering": ["-updated_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="Message",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "seq",
                    models.PositiveBigIntegerField(help_text="Per-owner sequence number (the paper's message id)."),
                ),
                (
                    "role",
                    models.CharField(
                        choices=[("user", "User"), ("assistant", "Assistant"), ("summary", "Summary")], max_length=16
                    ),
                ),
                ("content", models.TextField(blank=True)),
                (
                    "embedding",
                    pgvector.django.vector.VectorField(blank=True, dimensions=settings.DELLM_EMBEDDING_DIM, null=True),
                ),
                ("embedding_model", models.CharField(blank=True, default="", max_length=100)),
                (
                    "search",
                    models.GeneratedField(
                        db_persist=True,
                        expression=django.contrib.postgres.search.SearchVector("content", config="english"),
                        output_field=django.contrib.postgres.search.SearchVectorField(),
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("active", "Active"),
                            ("deleted", "Deleted"),
                            ("purged", "Purged"),
                            ("expiring", "Expiring"),
                        ],
                        default="active",
                        max_length=16,
                    ),
                ),
                ("deleted_by_id", models.BigIntegerField(blank=True, db_index=True, null=True)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "thread",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="messages", to="chat.thread"
                    ),
                ),
            ],
            options={
                "ordering": ["seq"],
            },
        ),
        migrations.CreateModel(
            name="Turn",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("running", "Running"),
                            ("done", "Done"),
                            ("failed", "Failed"),
                        ],
                        default="pending",
                        max_length=16,
                    ),
                ),
                ("error", models.TextField(blank=True, default="", help_text="For humans; never message text.")),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("policy", models.CharField(default="relevant", max_length=16)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="turns", to=settings.AUTH_USER_MODEL
                    ),
                ),
                (
                    "reply",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="chat.message",
                    ),
                ),
                (
                    "user_message",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="turns", to="chat.message"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="ContextEdge",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("rank", models.PositiveSmallIntegerField()),
                (
                    "score",
                    models.FloatField(help_text="Cosine similarity at retrieval time (1.0 for the user message)."),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
                (
                    "source",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="out_edges",
                        to="chat.message",
                    ),
                ),
                (
                    "target",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="in_edges",
                        to="chat.message",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["target"], name="edge_target")],
                "constraints": [
                    models.UniqueConstraint(fields=("source", "target"), name="edge_source_target_unique"),
                    models.CheckConstraint(
                        condition=models.Q(("source", models.F("target")), _negated=True), name="edge_not_self"
                    ),
                ],
            },
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
