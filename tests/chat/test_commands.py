from django.core.management import call_command

from chat.models import Message
from tests.factories import make_message


def test_reembed_fills_vectors_for_messages_with_content(owner, thread):
    live = make_message(thread, "I live in Paris")
    deleted = make_message(thread, "I like tea", status="deleted")
    purged = make_message(thread, "", status="purged")
    call_command("reembed")
    rows = {m.pk: m for m in Message.objects.filter(owner=owner)}
    assert len(rows[live.pk].embedding) == 256
    assert len(rows[deleted.pk].embedding) == 256
    assert rows[purged.pk].embedding is None
    assert rows[live.pk].embedding_model == "wordllama-l2_supercat-256"
