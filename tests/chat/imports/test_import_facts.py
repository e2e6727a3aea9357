"""DeLLM's own export with facts, imported into another account: facts are never copied, but drawn again."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chat.facts.extract import facts_extract_pass
from chat.imports.formats import parse_file
from chat.models import ContextEdge, ImportJob, Message, Thread
from chat.subjects import FACTS_SOURCE, FACTS_SOURCE_ID
from tests.factories import make_message

pytestmark = [pytest.mark.django_db]


def test_an_export_with_facts_imports_without_them_and_the_facts_are_drawn_again(
    owner, other_owner, thread, api, other_api, django_capture_on_commit_callbacks
):
    said = make_message(thread, "I live in Lisbon near the river.")
    make_message(thread, "Lisbon is lovely.", role="assistant")
    facts_extract_pass(owner_id=owner.pk)
    export = b"".join(api.get("/api/export/").streaming_content)
    assert '"role":"fact"' in export.decode()

    upload = SimpleUploadedFile("dellm-export.json", export)
    with django_capture_on_commit_callbacks(execute=True):
        assert other_api.post("/api/imports/", {"file": upload}, format="multipart").status_code == 202

    job = ImportJob.objects.get(owner=other_owner)
    assert (job.status, job.errors, job.messages_total, job.messages_imported, job.messages_skipped) == (
        "done",
        [],
        3,
        2,
        1,
    )
    # Nothing of the fact was copied: the imported rows are the two messages, in their own thread.
    imported = Message.objects.filter(owner=other_owner, imported_from="dellm")
    assert sorted(imported.values_list("role", flat=True)) == ["assistant", "user"]
    conversations = Thread.objects.filter(owner=other_owner).exclude(source_id=FACTS_SOURCE_ID)
    assert list(conversations.values_list("title", flat=True)) == [thread.title]
    # The import's extraction pass drew the fact again, from the imported user message.
    fact = Message.objects.get(owner=other_owner, role="fact")
    source = imported.get(role="user")
    assert (fact.content, fact.imported_from, fact.thread.source_id) == (
        "Home city: I live in Lisbon near the river.",
        "",
        FACTS_SOURCE_ID,
    )
    assert fact.thread.source == FACTS_SOURCE
    assert list(ContextEdge.objects.filter(target=fact).values_list("source_id", "signal")) == [(source.pk, "fact")]
    assert said.pk != source.pk


def test_the_parser_counts_the_facts_and_their_edges_it_skips(owner, thread, api):
    make_message(thread, "I live in Lisbon near the river.")
    facts_extract_pass(owner_id=owner.pk)
    document = json.loads(b"".join(api.get("/api/export/").streaming_content))
    # An export made before the facts thread was listed names it in its messages only.
    document["threads"] = [t for t in document["threads"] if t["id"] == thread.pk]

    parsed = parse_file(json.dumps(document).encode(), format="dellm")

    assert (parsed.errors, parsed.facts_skipped, parsed.fact_edges_skipped) == ([], 1, 1)
    assert [(c.title, [m.role for m in c.messages]) for c in parsed.conversations] == [(thread.title, ["user"])]
    assert parsed.edges == []
