"""The export holds the facts: role `fact`, their subject, the facts thread, and their `fact` edges."""

import json

import pytest

from chat.facts.extract import facts_extract_pass
from chat.models import Message
from chat.subjects import FACTS_TITLE
from tests.factories import make_message

pytestmark = [pytest.mark.django_db]


def test_the_export_lists_facts_with_their_subject_thread_and_edges(owner, thread, api):
    said = make_message(thread, "I live in Lisbon near the river.")
    facts_extract_pass(owner_id=owner.pk)
    fact = Message.objects.get(owner=owner, role="fact")

    document = json.loads(b"".join(api.get("/api/export/").streaming_content))

    messages = {m["id"]: m for m in document["messages"]}
    assert (messages[fact.pk]["role"], messages[fact.pk]["subject"], messages[fact.pk]["content"]) == (
        "fact",
        "home",
        "Home city: I live in Lisbon near the river.",
    )
    assert messages[said.pk]["subject"] is None
    threads = {t["id"]: t["title"] for t in document["threads"]}
    assert threads == {thread.pk: thread.title, fact.thread_id: FACTS_TITLE}
    assert [(e["source"], e["target"], e["signal"]) for e in document["edges"]] == [(said.pk, fact.pk, "fact")]
    # The conversations list still leaves the facts thread out.
    assert [t["id"] for t in api.get("/api/threads/").json()] == [thread.pk]
