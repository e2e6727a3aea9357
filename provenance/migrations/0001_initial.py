# The whole provenance schema, squashed (layout-v2). After chat's: provenance
# reads chat's tables (raw SQL joins them); chat never refers to provenance.

import django.contrib.postgres.fields
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("chat", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
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
                            ("verification_failed", "Verification Failed"),
                        ],
                        default="previewed",
                        max_length=24,
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
                ("receipt", models.JSONField(blank=True, null=True)),
                ("verified_at", models.DateTimeField(blank=True, null=True)),
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
                "permissions": [
                    ("run_subject_deletion", "Can run a deletion on a user's behalf (data-subject request)")
                ],
                "indexes": [
                    models.Index(fields=["owner", "-created_at"], name="deletion_owner_recent"),
                    models.Index(fields=["status", "expire_at"], name="deletion_due"),
                ],
            },
        ),
    ]
