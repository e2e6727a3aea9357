"""The index_sources GIN without a pending list (fastupdate off): a removal looks it up once per removed message.

With fastupdate each look-up also read the list of entries not yet merged,
which a purge's own UPDATE had just filled: 67 s for a purge of 10,000.
Rebuilt on every partition (the index of a partitioned table recurses).
"""

import django.contrib.postgres.indexes
from django.conf import settings
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0017_partition_threads"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="message",
            name="message_index_sources_gin",
        ),
        migrations.AddIndex(
            model_name="message",
            index=django.contrib.postgres.indexes.GinIndex(
                fastupdate=False, fields=["index_sources"], name="message_index_sources_gin"
            ),
        ),
    ]
