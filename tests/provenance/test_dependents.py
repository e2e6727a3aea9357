import itertools
from collections import deque

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from core.errors import NotFound
from provenance.dependents import dep_ids, dependent_path, explanation_paths, message_dependents, taint_violations
from tests.factories import make_edge, make_message, make_thread, make_user


@pytest.fixture
def paper_graph(thread):
    """The paper's worked example: context(m2)={m1}, context(m4)={m1,m3},
    context(m6)={m5}, context(m8)={m1,m7}."""
    m = {i: make_message(thread, role="user" if i % 2 else "assistant") for i in range(1, 9)}
    for source, target in [(1, 2), (1, 4), (3, 4), (5, 6), (1, 8), (7, 8)]:
        make_edge(m[source], m[target])
    return m


def test_dep_paper_example_is_exact(owner, paper_graph):
    m = paper_graph
    assert dep_ids(owner_id=owner.pk, roots=[m[1].pk]) == {m[1].pk, m[2].pk, m[4].pk, m[8].pk}
    assert dep_ids(owner_id=owner.pk, roots=[m[3].pk]) == {m[3].pk, m[4].pk}
    assert dep_ids(owner_id=owner.pk, roots=[m[3].pk, m[5].pk]) == {m[3].pk, m[4].pk, m[5].pk, m[6].pk}


def test_dep_of_nothing_is_empty(owner):
    assert dep_ids(owner_id=owner.pk, roots=[]) == set()


def test_dep_depth_limits_taint_level(owner, thread):
    chain = [make_message(thread) for _ in range(5)]
    for a, b in itertools.pairwise(chain):
        make_edge(a, b)
    ids = [c.pk for c in chain]
    assert dep_ids(owner_id=owner.pk, roots=[ids[0]], depth=0) == {ids[0]}
    assert dep_ids(owner_id=owner.pk, roots=[ids[0]], depth=2) == set(ids[:3])
    assert dep_ids(owner_id=owner.pk, roots=[ids[0]], depth=10) == set(ids)


def test_dep_survives_heavy_fan_in(owner, thread):
    # A layered DAG where every node feeds every node of the next layer has
    # 6**8 root-to-leaf paths; UNION ALL or a path column would enumerate them.
    layers = [[make_message(thread) for _ in range(6)] for _ in range(8)]
    for upper, lower in itertools.pairwise(layers):
        for a in upper:
            for b in lower:
                make_edge(a, b)
    result = dep_ids(owner_id=owner.pk, roots=[layers[0][0].pk])
    assert result == {layers[0][0].pk} | {m.pk for layer in layers[1:] for m in layer}


def test_dep_of_another_owners_message_is_empty(owner, other_owner, paper_graph):
    foreign = make_message(make_thread(other_owner))
    assert dep_ids(owner_id=other_owner.pk, roots=[paper_graph[1].pk]) == set()
    assert dep_ids(owner_id=other_owner.pk, roots=[paper_graph[1].pk], depth=2) == set()
    assert dep_ids(owner_id=owner.pk, roots=[foreign.pk, paper_graph[8].pk]) == {paper_graph[8].pk}


def test_explanation_paths_are_shortest_and_start_at_a_root(owner, paper_graph):
    m = paper_graph
    paths = explanation_paths(owner_id=owner.pk, roots=[m[1].pk])
    assert paths == {m[2].pk: [m[1].pk, m[2].pk], m[4].pk: [m[1].pk, m[4].pk], m[8].pk: [m[1].pk, m[8].pk]}


def test_explanation_paths_follow_chains(owner, thread):
    a, b, c = (make_message(thread) for _ in range(3))
    make_edge(a, b)
    make_edge(b, c)
    assert explanation_paths(owner_id=owner.pk, roots=[a.pk]) == {
        b.pk: [a.pk, b.pk],
        c.pk: [a.pk, b.pk, c.pk],
    }


def test_taint_violations_name_live_children_of_removed_messages(owner, paper_graph):
    m = paper_graph
    assert taint_violations() == []
    m[1].status = "deleted"
    m[1].save(update_fields=["status"])
    assert taint_violations(owner_id=owner.pk) == [
        (owner.pk, m[2].pk, m[1].pk),
        (owner.pk, m[4].pk, m[1].pk),
        (owner.pk, m[8].pk, m[1].pk),
    ]


def _reference_paths(
    children: dict[int, list[int]], roots: list[int], limit: int | None, depth: int | None = None
) -> dict[int, list[int]]:
    """The walk explanation paths are defined by: a queue from the sorted roots, children in ascending id."""
    parent: dict[int, int | None] = dict.fromkeys(sorted(set(roots)))
    level = dict.fromkeys(parent, 0)
    queue, found = deque(parent), 0
    while queue and (limit is None or found < limit):
        node = queue.popleft()
        if depth is not None and level[node] >= depth:
            continue
        for child in sorted(children.get(node, ())):
            if child not in parent and (limit is None or found < limit):
                parent[child] = node
                level[child] = level[node] + 1
                queue.append(child)
                found += 1
    paths = {}
    for node, up in parent.items():
        if up is not None:
            path = [node]
            while (step := parent[path[-1]]) is not None:
                path.append(step)
            paths[node] = path[::-1]
    return paths


@st.composite
def dags(draw):
    """A DAG on n messages (parents among earlier ones), some roots, and a bound on the paths."""
    n = draw(st.integers(min_value=2, max_value=16))
    parents = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=4))) if i else [] for i in range(n)]
    roots = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    depth = draw(st.one_of(st.none(), st.integers(0, 4)))
    return n, parents, roots, draw(st.integers(min_value=1, max_value=n)), depth


@pytest.mark.django_db
@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=dags())
def test_bounded_and_on_demand_paths_equal_the_reference_walk(case, settings):
    n, parents, roots, limit, depth = case
    settings.DELLM_MAX_EXPLANATION_PATHS = limit
    with transaction.atomic():
        owner = make_user()
        thread = make_thread(owner)
        messages = [make_message(thread, f"fact {i}") for i in range(n)]
        children: dict[int, list[int]] = {}
        for child, sources in enumerate(parents):
            for source in sources:
                make_edge(messages[source], messages[child])
                children.setdefault(messages[source].pk, []).append(messages[child].pk)
        root_ids = [messages[i].pk for i in roots]
        assert explanation_paths(owner_id=owner.pk, roots=root_ids, depth=depth) == _reference_paths(
            children, root_ids, limit, depth
        )
        # One root's dependents: every id and the count complete, the bounded paths as the reference
        # lists them, and any dependent's path on demand equal to the unbounded reference.
        root = root_ids[0]
        complete = _reference_paths(children, [root], None, depth)
        found = message_dependents(owner=owner, message_id=root, depth=depth)
        assert (found.ids, found.count) == (sorted(complete), len(complete))
        assert {d.id: d.path for d in found.items} == _reference_paths(children, [root], limit, depth)
        on_demand = {pk: dependent_path(owner=owner, message_id=root, dependent_id=pk, depth=depth) for pk in complete}
        assert on_demand == complete
        transaction.set_rollback(True)


def test_dependent_path_of_a_message_outside_dep_is_not_found(owner, other_owner, paper_graph):
    m = paper_graph
    assert dependent_path(owner=owner, message_id=m[1].pk, dependent_id=m[8].pk) == [m[1].pk, m[8].pk]
    for outside in (m[1].pk, m[3].pk, m[6].pk):
        with pytest.raises(NotFound):
            dependent_path(owner=owner, message_id=m[1].pk, dependent_id=outside)
    with pytest.raises(NotFound):
        dependent_path(owner=other_owner, message_id=m[1].pk, dependent_id=m[2].pk)


def test_dependent_path_honours_depth(owner, thread):
    chain = [make_message(thread) for _ in range(4)]
    for a, b in itertools.pairwise(chain):
        make_edge(a, b)
    ids = [c.pk for c in chain]
    assert dependent_path(owner=owner, message_id=ids[0], dependent_id=ids[2], depth=2) == ids[:3]
    with pytest.raises(NotFound):
        dependent_path(owner=owner, message_id=ids[0], dependent_id=ids[3], depth=2)
