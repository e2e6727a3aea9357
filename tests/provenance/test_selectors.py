import itertools

import pytest

from provenance.selectors import dep_ids, explanation_paths, taint_violations
from tests.factories import make_edge, make_message, make_thread


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
    members = dep_ids(owner_id=owner.pk, roots=[m[1].pk])
    paths = explanation_paths(owner_id=owner.pk, roots=[m[1].pk], members=members)
    assert paths == {m[2].pk: [m[1].pk, m[2].pk], m[4].pk: [m[1].pk, m[4].pk], m[8].pk: [m[1].pk, m[8].pk]}


def test_explanation_paths_follow_chains(owner, thread):
    a, b, c = (make_message(thread) for _ in range(3))
    make_edge(a, b)
    make_edge(b, c)
    members = dep_ids(owner_id=owner.pk, roots=[a.pk])
    assert explanation_paths(owner_id=owner.pk, roots=[a.pk], members=members) == {
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
