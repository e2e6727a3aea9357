"""Random histories and deletions against a reference traversal (rustworkx)."""

from datetime import timedelta

import pytest
import rustworkx as rx
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.models import Message
from core.errors import Conflict
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.expiry import deletion_fire
from provenance.deletions.preview import deletion_preview
from provenance.deletions.undo import deletion_undo
from provenance.dependents import dep_ids, taint_violations
from tests.factories import make_edge, make_message, make_thread, make_user

LIVE = {"active", "expiring"}


@st.composite
def histories(draw):
    """A DAG on n messages: each message draws its parents among earlier ones."""
    n = draw(st.integers(min_value=1, max_value=18))
    parents = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=4))) if i else [] for i in range(n)]
    operation = st.one_of(
        st.tuples(
            st.just("delete"),
            st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True),
            st.sampled_from(["soft", "purge", "expire"]),
            st.one_of(st.none(), st.integers(0, 3)),
        ),
        st.tuples(st.just("undo"), st.integers(0, 10)),
    )
    return n, parents, draw(st.lists(operation, min_size=1, max_size=6))


def reference_dep(graph: rx.PyDiGraph, roots: list[int], depth: int | None) -> set[int]:
    if depth is None:
        found = set(roots)
        for root in roots:
            found |= rx.descendants(graph, root)
        return found
    found, frontier = set(roots), set(roots)
    for _ in range(depth):
        frontier = {child for node in frontier for child in graph.successor_indices(node)} - found
        found |= frontier
    return found


def statuses(owner) -> dict[int, str]:
    return dict(Message.objects.filter(owner=owner).values_list("id", "status"))


def assert_invariants(owner):
    assert taint_violations(owner_id=owner.pk) == []


@pytest.mark.django_db
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_random_deletions_keep_invariants(history):
    n, parents, operations = history
    with transaction.atomic():
        owner = make_user()
        thread = make_thread(owner)
        messages = [make_message(thread, f"fact {i}") for i in range(n)]
        graph = rx.PyDiGraph()
        graph.add_nodes_from(range(n))
        for child, sources in enumerate(parents):
            for source in sources:
                make_edge(messages[source], messages[child])
                graph.add_edge(source, child, None)
        pk = [m.pk for m in messages]
        index = {p: i for i, p in enumerate(pk)}
        executed_soft = []

        for operation in operations:
            before = statuses(owner)
            if operation[0] == "delete":
                _, roots, mode, depth = operation
                expected = reference_dep(graph, roots, depth)
                assert dep_ids(owner_id=owner.pk, roots=[pk[r] for r in roots], depth=depth) == {
                    pk[i] for i in expected
                }
                preview = deletion_preview(
                    owner=owner,
                    actor=owner,
                    ids=[pk[r] for r in roots],
                    mode=mode,
                    depth=depth,
                    expire_at=timezone.now() + timedelta(hours=1) if mode == "expire" else None,
                )
                assert statuses(owner) == before
                done = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
                if mode == "expire":
                    done = deletion_fire(deletion_id=done.pk, now=done.expire_at + timedelta(seconds=1))
                # I2: exactly Dep(M) changes, as the mode prescribes.
                want = dict(before)
                for i in expected:
                    if mode == "soft" and before[pk[i]] in LIVE:
                        want[pk[i]] = "deleted"
                    elif mode != "soft":
                        want[pk[i]] = "purged"
                assert statuses(owner) == want
                assert sorted(done.deleted_ids) == sorted(p for p in want if want[p] != before[p])
                if mode == "soft":
                    executed_soft.append((done.pk, set(done.deleted_ids)))
            elif executed_soft:
                deletion_id, removed = executed_soft[operation[1] % len(executed_soft)]
                try:
                    deletion_undo(deletion_id=deletion_id, owner_id=owner.pk)
                except Conflict:
                    assert statuses(owner) == before
                else:
                    after = statuses(owner)
                    assert {p for p in after if after[p] != before[p]} == {p for p in removed if before[p] != "active"}
                    assert all(after[p] == "active" for p in removed)
                    executed_soft.remove((deletion_id, removed))
            # I1, unless a depth-limited deletion relaxed it (then it is recorded).
            relaxed = [op for op in operations if op[0] == "delete" and op[3] is not None]
            if not relaxed:
                assert_invariants(owner)
            assert set(index) == set(statuses(owner))
        transaction.set_rollback(True)
