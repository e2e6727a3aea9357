from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("provenance", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="deletionrequest",
            name="receipt",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="deletionrequest",
            name="verified_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="deletionrequest",
            name="status",
            field=models.CharField(
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
    ]
