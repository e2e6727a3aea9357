"""The scrub's own record of which purges it has scrubbed (provenance/erasure), in place of a time in the cache.

Purges executed before this migration start unscrubbed: the first scrub after
it rebuilds their owners' parts of the text indexes once, which is safe.
"""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("provenance", "0002_deletion_regenerate_and_redact"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="deletionrequest",
            name="scrubbed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="deletionrequest",
            index=models.Index(
                condition=models.Q(
                    ("mode__in", ["purge", "expire"]),
                    ("scrubbed_at__isnull", True),
                    ("status__in", ["executed", "verification_failed"]),
                ),
                fields=["owner"],
                name="deletion_unscrubbed",
            ),
        ),
    ]
