"""Facts against a reference model, over random histories of statements, deletions, undos and declines.

The reference knows only what the user said and what was removed: a fact about a subject is live exactly
while some live message says it (and the user did not decline it from that message), and the current fact
of a single-valued subject is what the newest such message says. The system is driven through its services
(extraction, deletion with its preview, re-derivation, undo, decline), and after each step I1 holds for the
whole graph, the live facts' texts are the reference's, and each single-valued subject's current fact is.
"""

import contextlib
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chat.facts.extract import facts_extract_pass
from chat.models import Message
from chat.retrieval.facts import subject_facts
from chat.statements import statements
from chat.subjects import SUBJECTS
from core.errors import Conflict
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.facts import fact_decline
from provenance.deletions.preview import deletion_preview
from provenance.deletions.undo import deletion_undo
from provenance.dependents import taint_violations
from tests.factories import make_message, make_thread, make_user

# Few statements, so that histories say the same thing twice (one fact, two sources) and change their minds.
SAID = [
    "I live in Lisbon.",
    "I moved to Porto for a new job.",
    "My dog is called Rex.",
    "The weather was grey all day.",
]
START = datetime(2024, 1, 1, tzinfo=UTC)


@st.composite
def histories(draw):
    step = st.one_of(
        st.tuples(st.just("say"), st.integers(0, len(SAID) - 1)),
        st.tuples(
            st.just("delete"),
            st.lists(st.integers(0, 30), min_size=1, max_size=2, unique=True),
            st.sampled_from(["soft", "purge"]),
        ),
        st.tuples(st.just("undo"), st.integers(0, 10)),
        st.tuples(st.just("decline"), st.integers(0, 10)),
    )
    return draw(st.lists(step, min_size=1, max_size=14))


def expected(said: list[tuple[int, str]], live: set[int], declined: set[tuple[int, str]]):
    """(live fact texts, {single subject: current text}) by the reference's rule."""
    texts: set[str] = set()
    newest: dict[str, tuple[int, str]] = {}
    for order, (pk, text) in enumerate(said):
        if pk not in live:
            continue
        for statement in statements(text):
            if (pk, statement.subject) in declined:
                continue
            texts.add(statement.text)
            if SUBJECTS[statement.subject].single:
                newest[statement.subject] = (order, statement.text)
    return texts, {subject: text for subject, (_, text) in newest.items()}


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
# Said twice, one source forgotten: the fact is drawn again from the other.
@example(history=[("say", 0), ("say", 0), ("delete", [0], "soft")])
# Lisbon, Porto (forgotten), Lisbon again, the forgetting undone: what was said last, Lisbon, is current.
@example(history=[("say", 0), ("say", 1), ("delete", [1], "soft"), ("say", 0), ("undo", 0)])
# Said three times, the first purged (drawn again from the other two), then declined: from both survivors.
@example(history=[("say", 1), ("say", 1), ("say", 1), ("delete", [0], "purge"), ("decline", 0)])
def test_facts_follow_their_live_sources(history):
    with transaction.atomic():
        owner = make_user()
        thread = make_thread(owner)
        said: list[tuple[int, str]] = []
        declined: set[tuple[int, str]] = set()
        soft: list[int] = []
        for step in history:
            if step[0] == "say":
                text = SAID[step[1]]
                message = make_message(thread, text, source_created_at=START + timedelta(days=len(said)))
                said.append((message.pk, text))
                facts_extract_pass(owner_id=owner.pk)
            elif step[0] == "delete" and said:
                ids = sorted({said[i % len(said)][0] for i in step[1]})
                live = Message.objects.filter(pk__in=ids, status__in=Message.LIVE).exists()
                if not live and step[2] == "soft":
                    continue
                preview = deletion_preview(owner=owner, actor=owner, ids=ids, mode=step[2])
                done = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
                if step[2] == "soft":
                    soft.append(done.pk)
            elif step[0] == "undo" and soft:
                deletion_id = soft[step[1] % len(soft)]
                with contextlib.suppress(Conflict):  # a later purge took some of its messages: nothing changes
                    deletion_undo(deletion_id=deletion_id, owner_id=owner.pk)
                soft.remove(deletion_id)
            elif step[0] == "decline":
                facts = list(Message.objects.filter(owner=owner, role="fact", status__in=Message.LIVE).order_by("pk"))
                if not facts:
                    continue
                fact = facts[step[1] % len(facts)]
                sources = Message.objects.filter(
                    out_edges__target=fact, out_edges__signal="fact", status__in=Message.LIVE
                ).values_list("pk", flat=True)
                subject = next(s.subject for s in statements(Message.objects.get(pk=sources[0]).content))
                declined |= {(pk, subject) for pk in sources}
                fact_decline(owner=owner, fact_id=fact.pk)
            live_ids = set(
                Message.objects.filter(owner=owner, status__in=Message.LIVE, role="user").values_list("pk", flat=True)
            )
            # I1 for the whole graph: no live fact (nor reply) with a removed source.
            assert taint_violations(owner_id=owner.pk) == []
            texts, current = expected(said, live_ids, declined)
            facts = Message.objects.filter(owner=owner, role="fact", status__in=Message.LIVE)
            assert set(facts.values_list("content", flat=True)) == texts
            singles = [key for key, subject in SUBJECTS.items() if subject.single]
            found = subject_facts(owner_id=owner.pk, subjects=singles)
            heads = {subject: Message.objects.get(pk=ordered[0].id).content for subject, ordered in found.items()}
            assert heads == current
        transaction.set_rollback(True)
