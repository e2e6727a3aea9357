"""A purge of a fact's source leaves no word of the fact anywhere a forensic reader would look (I3)."""

import pytest

from assistant.mcp.tools import explain
from chat.facts.extract import facts_extract_pass
from chat.models import Fact, FactDecline, Message
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.facts import fact_decline
from provenance.deletions.preview import deletion_preview
from provenance.erasure.eraser import scrub
from provenance.erasure.registry import TABLES
from provenance.graph import graph_nodes
from tests.factories import make_message
from tests.helpers import heap_tuples, indexes_of, relation_files

# Words no other test uses: a rolled-back test leaves its own in relation files until a flush.
WORDS = (b"exholm", b"uillbury")  # as written and as lexemes (lower case)
SAID = "I live in Vexholm and work as a nurse at the Quillbury clinic."


def _residue() -> dict[str, list[bytes]]:
    """{relation: the purged words in it}: every table's tuples (and TOAST's), every index's whole file."""
    found = {}
    for name, data in relation_files([*TABLES, *sorted(indexes_of(list(TABLES)))]).items():
        text = heap_tuples(data) if name.removesuffix(":toast") in TABLES else data
        if words := [word for word in WORDS if word in text]:
            found[name] = words
    return found


@pytest.mark.django_db(transaction=True)
def test_a_purged_source_takes_its_facts_words_from_every_table_and_index(owner, thread):
    source = make_message(thread, SAID)
    make_message(thread, "I love hiking in the hills.")
    facts_extract_pass(owner_id=owner.pk)
    facts = Message.objects.filter(owner=owner, role="fact")
    assert sorted(facts.values_list("content", flat=True)) == [
        "Home city: I live in Vexholm.",
        "Likes and hobbies: I love hiking in the hills.",
        "Work and job: I work as a nurse at the Quillbury clinic.",
    ]
    assert set(_residue()) >= {"chat_message", "message_search_gin"}  # the test sees the words before

    preview = deletion_preview(owner=owner, actor=owner, ids=[source.pk], mode="purge")
    done = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    gone = facts.filter(content="", status="purged")
    assert set(done.deleted_ids) == {source.pk, *gone.values_list("pk", flat=True)} and gone.count() == 2
    # The subjects stay (a closed list's keys, never words); the live fact is untouched.
    assert Fact.objects.filter(owner=owner).count() == 3
    assert facts.filter(status="active").get().content == "Likes and hobbies: I love hiking in the hills."
    scrub()  # what beat runs every scrub interval: the purging owner's part of each text index
    assert _residue() == {}


@pytest.mark.django_db(transaction=True)
def test_a_removed_fact_tells_nobody_what_it_was_about(owner, thread):
    purged_source = make_message(thread, "My partner Sam is a pilot.")
    soft_source = make_message(thread, "I am allergic to peanuts.")
    declined_source = make_message(thread, "I have two sisters in Porto.")
    facts_extract_pass(owner_id=owner.pk)
    facts = dict(Fact.objects.filter(owner=owner).values_list("subject", "message_id"))
    assert set(facts) == {"partner", "health", "family"}
    fact_decline(owner=owner, fact_id=facts["family"])
    for source, mode in ((purged_source, "purge"), (soft_source, "soft"), (declined_source, "purge")):
        preview = deletion_preview(owner=owner, actor=owner, ids=[source.pk], mode=mode)
        deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)  # re-derives (eager)
    # Stored: a purged fact's row keeps no subject, and no decline names a purged source's.
    assert dict(Fact.objects.filter(owner=owner).values_list("message_id", "subject")) == {
        facts["partner"]: "",
        facts["health"]: "health",  # soft-deleted: restorable, shown nowhere
        facts["family"]: "",
    }
    assert not FactDecline.objects.filter(owner=owner).exists()
    # Shown: neither the staff graph (deleted nodes included) nor an agent's `explain` names it.
    nodes = graph_nodes(owner=owner, include_deleted=True).filter(pk__in=facts.values())
    assert list(nodes.values_list("subject", flat=True)) == [None, None, None]
    for fact in facts.values():
        assert explain(user=owner, client="test", id=fact)["subject"] is None
