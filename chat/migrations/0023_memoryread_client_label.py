"""The read log keeps a client's name as a label (chat/agent_memory.py, `client_label`): existing names are cut
down to one, then the column to its length. The rule is spelt out here, as it was when this ran."""

import re

from django.db import migrations, models

_NOT_IN_A_LABEL = re.compile(r"[^A-Za-z0-9._ -]+")


def labels(apps, schema_editor):
    MemoryRead = apps.get_model("chat", "MemoryRead")
    for name in MemoryRead.objects.values_list("client", flat=True).distinct().iterator():
        label = " ".join(_NOT_IN_A_LABEL.sub(" ", name).split())[:40].strip() or "unknown"
        if label != name:
            MemoryRead.objects.filter(client=name).update(client=label)


class Migration(migrations.Migration):
    dependencies = [("chat", "0022_thread_title_sources")]

    operations = [
        migrations.RunPython(labels, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(model_name="memoryread", name="client", field=models.CharField(max_length=40)),
    ]
