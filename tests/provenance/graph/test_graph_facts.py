"""Facts in `GET /api/graph/`: nodes of role `fact` with their subject, and their `fact` edges."""

import pytest

from chat.facts.extract import facts_extract_pass
from chat.models import Message
from tests.factories import make_message

pytestmark = [pytest.mark.django_db]


def test_a_fact_is_a_node_with_its_subject_and_a_fact_edge_from_its_source(owner, thread, api):
    said = make_message(thread, "I live in Lisbon near the river.")
    facts_extract_pass(owner_id=owner.pk)
    fact = Message.objects.get(owner=owner, role="fact")

    graph = api.get("/api/graph/").json()

    nodes = {n["data"]["id"]: n["data"] for n in graph["nodes"]}
    assert [(n["role"], n["subject"]) for n in nodes.values()] == [("user", None), ("fact", "home")]
    assert nodes[fact.pk]["label"] == f"#{fact.seq} fact: Home city: I live in Lisbon near the riv…"
    assert [(e["data"]["source"], e["data"]["target"], e["data"]["signal"]) for e in graph["edges"]] == [
        (said.pk, fact.pk, "fact")
    ]
    # The facts thread is a thread filter like any other.
    only = api.get(f"/api/graph/?thread={fact.thread_id}").json()
    assert [n["data"]["id"] for n in only["nodes"]] == [fact.pk]
