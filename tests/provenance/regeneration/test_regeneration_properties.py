"""Random conversations, a regenerating deletion, then the regeneration: against a reference model."""

import numpy as np
import pytest
import rustworkx as rx
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chat.models import ContextEdge, Message, Turn
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.dependents import taint_violations
from tests.factories import make_edge, make_message, make_thread, make_user

LIVE = {"active", "expiring"}
TOPICS = 3


def topic_vector(topic: int, seed: int) -> list[float]:
    # Messages on one topic are near each other, so rebuilt contexts are not empty.
    rng = np.random.default_rng(seed)
    base = np.random.default_rng(1000 + topic).standard_normal(256)
    vector = base + 0.3 * rng.standard_normal(256)
    return (vector / np.linalg.norm(vector)).tolist()


@st.composite
def conversations(draw):
    """n turns: turn i is a user message u_i and its reply r_i, whose context is u_i plus earlier messages."""
    n = draw(st.integers(min_value=1, max_value=7))
    topics = [draw(st.integers(0, TOPICS - 1)) for _ in range(n)]
    # Earlier messages as indices into the 2n messages (u_i = 2i, r_i = 2i + 1).
    contexts = [sorted(draw(st.sets(st.integers(0, 2 * i - 1), max_size=3))) if i else [] for i in range(n)]
    roots = draw(st.lists(st.integers(0, 2 * n - 1), min_size=1, max_size=2, unique=True))
    mode = draw(st.sampled_from(["soft", "purge"]))
    return n, topics, contexts, roots, mode


@pytest.mark.django_db
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conversation=conversations())
# Found by a clean-clone run: u_2's index held "1" through r_1; recomputed without it, the floor's whole of
# "fact 1 on topic 0" shrank and u_0 ("fact 0 on topic 0", unchanged) passed for a new match.
@example(conversation=(3, [0, 0, 0], [[], [], []], [2], "soft"))
def test_regeneration_rewrites_exactly_the_surviving_questions_from_live_context(conversation):
    n, topics, contexts, roots, mode = conversation
    with transaction.atomic():
        owner = make_user()
        thread = make_thread(owner)
        messages = []
        graph = rx.PyDiGraph()
        graph.add_nodes_from(range(2 * n))
        for i in range(n):
            role_texts = [("user", f"fact {i} on topic {topics[i]}"), ("assistant", f"Noted: fact {i}")]
            for offset, (role, text) in enumerate(role_texts):
                vector = topic_vector(topics[i], 2 * i + offset)
                messages.append(make_message(thread, text, role=role, embedding=vector))
            make_edge(messages[2 * i], messages[2 * i + 1], rank=0)
            graph.add_edge(2 * i, 2 * i + 1, None)
            for rank, source in enumerate(contexts[i], 1):
                make_edge(messages[source], messages[2 * i + 1], rank=rank)
                graph.add_edge(source, 2 * i + 1, None)
        pk = [m.pk for m in messages]

        # Reference: Dep(M); a reply is rewritten iff it is removed, not selected, and its question survives.
        dep = set(roots).union(*(rx.descendants(graph, r) for r in roots))
        expected = [pk[2 * i + 1] for i in range(n) if 2 * i + 1 in dep and 2 * i + 1 not in roots and 2 * i not in dep]

        preview = deletion_preview(
            owner=owner, actor=owner, ids=[pk[r] for r in roots], mode=mode, derived="regenerate"
        )
        assert preview.regenerate_ids == expected
        done = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

        statuses = dict(Message.objects.filter(owner=owner).values_list("id", "status"))
        assert {p for p in pk if statuses[p] not in LIVE} == {pk[i] for i in dep}
        turns = list(Turn.objects.filter(deletion_id=done.pk).order_by("replaces"))
        assert [t.replaces for t in turns] == expected
        assert all(t.status == "done" for t in turns)
        replies = [t.reply for t in turns]
        # Oldest first: a later rewrite may use an earlier one, never the reverse.
        assert [r.seq for r in replies] == sorted(r.seq for r in replies)
        for turn, reply in zip(turns, replies, strict=True):
            assert reply.status == "active"
            sources = ContextEdge.objects.filter(target=reply).order_by("rank").values_list("source_id", "rank")
            assert sources[0] == (turn.user_message_id, 0)
            assert all(statuses[s] in LIVE for s, _ in sources)
            assert reply.place == Message.objects.get(pk=turn.replaces).seq
        assert taint_violations(owner_id=owner.pk) == []
        assert done.receipt["passed"] is True
        if expected:
            assert done.receipt["checks"]["regeneration"]["rewritten"] == [r.pk for r in replies]
        transaction.set_rollback(True)
