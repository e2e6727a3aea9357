import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0021_facts"),
    ]

    operations = [
        migrations.AddField(
            model_name="thread",
            name="title_sources",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(), blank=True, db_default="{}", default=list, size=None
            ),
        ),
    ]
