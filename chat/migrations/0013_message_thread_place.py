from django.db import migrations, models


class Migration(migrations.Migration):
    """A partial index of rewrites' shown positions per thread: the neighbour lookup's second index (no text)."""

    dependencies = [
        ("chat", "0012_agent_notes_and_reads"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("place__isnull", False)), fields=["thread", "place"], name="message_thread_place"
            ),
        ),
    ]
