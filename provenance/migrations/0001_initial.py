import django.contrib.postgres.fields
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("chat", "0002_message_thread_turn"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
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
                        on_delete=django.db.models.deletion.CASCADE, related_name="out_edges", to="chat.message"
                    ),
                ),
                (
                    "target",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="in_edges", to="chat.message"
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
        migrations.CreateModel(
            name="DeletionRequest",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "selector",
                    models.CharField(
                        choices=[("ids", "Ids"), ("exact", "Exact"), ("semantic", "Semantic"), ("request", "Request")],
                        max_length=16,
                    ),
                ),
                (
                    "resolved_selector",
                    models.CharField(
                        blank=True,
                        choices=[("ids", "Ids"), ("exact", "Exact"), ("semantic", "Semantic"), ("request", "Request")],
                        default="",
                        max_length=16,
                    ),
                ),
                ("threshold", models.FloatField(blank=True, null=True)),
                (
                    "mode",
                    models.CharField(
                        choices=[("soft", "Soft"), ("purge", "Purge"), ("expire", "Expire")], max_length=16
                    ),
                ),
                (
                    "depth",
                    models.PositiveIntegerField(blank=True, help_text="Taint level limit; null = full Dep.", null=True),
                ),
                ("expire_at", models.DateTimeField(blank=True, null=True)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("previewed", "Previewed"),
                            ("scheduled", "Scheduled"),
                            ("executed", "Executed"),
                            ("cancelled", "Cancelled"),
                            ("undone", "Undone"),
                        ],
                        default="previewed",
                        max_length=16,
                    ),
                ),
                (
                    "matched_ids",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), default=list, size=None
                    ),
                ),
                (
                    "dependent_ids",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), default=list, size=None
                    ),
                ),
                (
                    "deleted_ids",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.BigIntegerField(), default=list, size=None
                    ),
                ),
                ("explanations", models.JSONField(default=dict)),
                ("outcome", models.TextField(blank=True, default="", help_text="What happened, in ids and counts.")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("confirmed_at", models.DateTimeField(blank=True, null=True)),
                ("executed_at", models.DateTimeField(blank=True, null=True)),
                ("undone_at", models.DateTimeField(blank=True, null=True)),
                (
                    "actor",
                    models.ForeignKey(
                        help_text="Who asked: the owner, or staff acting on a data-subject request.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "confirmed_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deletions",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
                "indexes": [
                    models.Index(fields=["owner", "-created_at"], name="deletion_owner_recent"),
                    models.Index(fields=["status", "expire_at"], name="deletion_due"),
                ],
            },
        ),
    ]
