"""Linear "derives from everything before it" edges against the n^2 reference (chat/lineage.py).

Random owners' histories: several conversations (threads), each a tree whose
root-to-leaf paths are its branches (an edited message starts a second
branch), some messages chain replies (supplied by a client or a file), others
ordinary replies and user messages with random retrieval edges from any
earlier message of the owner. Built once with the reference edges (every
earlier message of a branch -> each chain reply of it) and once with
`transcript_sources`; Dep must be the same for every message.
"""

from dataclasses import dataclass

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.lineage import ProvenanceCycle, sources_landed, transcript_sources
from chat.models import ContextEdge, Message
from provenance.deletions.preview import deletion_preview
from provenance.dependents import dep_ids
from tests.factories import make_thread, make_user


@dataclass(frozen=True)
class History:
    """Messages 0..n-1 in creation order."""

    parent: list[int | None]  # the message before it in its conversation; None: opens a conversation
    chain: list[bool]  # a chain reply (derives from everything before it in its branch)
    retrieved: list[list[int]]  # other in-edges (retrieval contexts): earlier messages of any conversation

    @property
    def size(self) -> int:
        return len(self.parent)

    def branches(self) -> list[list[int]]:
        """Root-to-leaf paths."""
        has_child = {p for p in self.parent if p is not None}
        paths = []
        for leaf in range(self.size):
            if leaf in has_child:
                continue
            path = [leaf]
            while (up := self.parent[path[-1]]) is not None:
                path.append(up)
            paths.append(path[::-1])
        return paths


@st.composite
def histories(draw, max_size: int = 16) -> History:
    n = draw(st.integers(min_value=1, max_value=max_size))
    parent: list[int | None] = []
    chain: list[bool] = []
    retrieved: list[list[int]] = []
    for i in range(n):
        parent.append(None if i == 0 else draw(st.one_of(st.none(), st.integers(0, i - 1))))
        # A chain reply continues a conversation: it has something before it.
        is_chain = parent[-1] is not None and draw(st.booleans())
        chain.append(is_chain)
        # A chain reply's only edges are its transcript edges; the others may
        # have a retrieval context (which may include chain replies).
        others = [] if is_chain or i == 0 else sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)))
        retrieved.append(others)
    return History(parent=parent, chain=chain, retrieved=retrieved)


def reference_edges(history: History) -> set[tuple[int, int]]:
    """n^2: every earlier message of a branch -> each chain reply of it."""
    edges = set()
    for branch in history.branches():
        for position, node in enumerate(branch):
            if history.chain[node]:
                edges |= {(source, node) for source in branch[:position]}
    return edges


def linear_edges(history: History) -> set[tuple[int, int]]:
    edges = set()
    for branch in history.branches():
        edges |= set(transcript_sources([(node, history.chain[node]) for node in branch]))
    return edges


def retrieval_edges(history: History) -> set[tuple[int, int]]:
    return {(source, target) for target, sources in enumerate(history.retrieved) for source in sources}


def descendants(edges: set[tuple[int, int]], root: int, depth: int | None = None) -> set[int]:
    """Dep(root) within `depth` hops: a breadth-first walk, the reference for the CTE."""
    children: dict[int, set[int]] = {}
    for source, target in edges:
        children.setdefault(source, set()).add(target)
    found, frontier, level = {root}, {root}, 0
    while frontier and (depth is None or level < depth):
        frontier = {child for node in frontier for child in children.get(node, ())} - found
        found |= frontier
        level += 1
    return found


# --- The function itself --------------------------------------------------------


def test_transcript_sources_alternating_chat_gets_two_edges_per_reply():
    # u1 a1 u2 a2 u3 a3: each reply from its question and the previous reply.
    branch = [(1, False), (2, True), (3, False), (4, True), (5, False), (6, True)]
    assert transcript_sources(branch) == [(1, 2), (2, 4), (3, 4), (4, 6), (5, 6)]


def test_transcript_sources_first_chain_reply_derives_from_everything_before_it():
    assert transcript_sources([(7, False), (8, False), (9, False), (10, True)]) == [(7, 10), (8, 10), (9, 10)]


def test_transcript_sources_consecutive_chain_replies_and_trailing_messages():
    # a1 right after a0, then two ordinary messages after the last chain reply: no edge for them.
    branch = [(1, False), (2, True), (3, True), (4, False), (5, False)]
    assert transcript_sources(branch) == [(1, 2), (2, 3)]


def test_transcript_sources_without_chain_replies_is_empty():
    assert transcript_sources([(1, False), (2, False)]) == []
    assert transcript_sources([]) == []


def test_transcript_sources_a_leading_chain_reply_has_no_source():
    assert transcript_sources([(1, True), (2, False), (3, True)]) == [(1, 3), (2, 3)]


# --- The pure reference model: many examples, no database --------------------------


@settings(max_examples=2000, deadline=None)
@given(history=histories(max_size=40))
def test_linear_edges_have_the_reference_dep_for_every_message(history):
    others = retrieval_edges(history)
    reference = reference_edges(history) | others
    linear = linear_edges(history) | others
    assert linear - others <= reference  # no edge the reference lacks
    for node in range(history.size):
        assert descendants(linear, node) == descendants(reference, node)
        # Depth counts stored edges: the linear form reaches a chain reply k
        # chain-hops later at depth k, the reference at 1. So a depth-limited
        # Dep over it is a subset of the reference's (docs/ARCHITECTURE.md).
        for depth in range(4):
            assert descendants(linear, node, depth) <= descendants(reference, node, depth)


@settings(max_examples=500, deadline=None)
@given(history=histories(max_size=40))
def test_linear_edges_are_at_most_one_out_of_each_message_of_a_branch(history):
    for branch in history.branches():
        edges = transcript_sources([(node, history.chain[node]) for node in branch])
        sources = [source for source, _ in edges]
        assert len(sources) == len(set(sources)) <= max(len(branch) - 1, 0)
        assert all(branch.index(source) < branch.index(target) for source, target in edges)
        assert all(history.chain[target] for _, target in edges)


def test_depth_limited_dep_over_a_linear_chain_is_a_strict_subset():
    # u1 a1 u2 a2 u3 a3, all replies supplied: a3 saw u1, one hop in the reference, three here.
    history = History(parent=[None, 0, 1, 2, 3, 4], chain=[False, True, False, True, False, True], retrieved=[[]] * 6)
    assert descendants(reference_edges(history), 0, depth=1) == {0, 1, 3, 5}
    assert descendants(linear_edges(history), 0, depth=1) == {0, 1}
    assert descendants(linear_edges(history), 0, depth=3) == {0, 1, 3, 5}


# --- Which new messages of a file land: one topological pass against the fixpoint -----


def fixpoint_landed(new: set[int], live: set[int], needs: list[tuple[int, int]]) -> set[int]:
    """The importer's old rule, the reference: drop a candidate with a source neither live nor a candidate, repeat.

    Quadratic on a chain (one candidate dropped per round), and on a DAG the
    same answer as a topological pass.
    """
    candidates = set(new)
    changed = True
    while changed:
        changed = False
        for key in sorted(candidates):
            if any(s not in live and s not in candidates for s, t in needs if t == key):
                candidates.discard(key)
                changed = True
    return candidates


@st.composite
def files(draw, max_size: int = 30) -> tuple[set[int], set[int], list[tuple[int, int]]]:
    """Keys 0..n-1 of a file, a topological order by index: some stored (live or removed), the rest new;
    edges from earlier to later keys, and from keys the file does not have (missing sources: n..n+2)."""
    n = draw(st.integers(min_value=1, max_value=max_size))
    kind = draw(st.lists(st.sampled_from(["new", "live", "removed"]), min_size=n, max_size=n))
    needs: list[tuple[int, int]] = []
    for target in range(n):
        if draw(st.booleans()):
            # A chain reply: it needs every key before it (the conversation's order).
            needs += [(source, target) for source in range(target)]
        else:
            sources = draw(st.sets(st.integers(0, n + 2), max_size=4))
            needs += [(source, target) for source in sorted(sources) if source < target or source >= n]
    needs = draw(st.permutations(needs))
    new = {key for key in range(n) if kind[key] == "new"}
    live = {key for key in range(n) if kind[key] == "live"}
    return new, live, list(needs)


@settings(max_examples=1000, deadline=None)
@given(file=files())
def test_sources_landed_is_the_fixpoint_on_random_files(file):
    new, live, needs = file
    assert sources_landed(new=new, live=live, needs=needs) == fixpoint_landed(new, live, needs)


@settings(max_examples=300, deadline=None)
@given(file=files(), cycle=st.lists(st.integers(0, 29), min_size=1, max_size=4, unique=True))
def test_sources_landed_refuses_a_cycle_among_new_keys(file, cycle):
    new, live, needs = file
    new |= set(cycle)
    closing = [(cycle[i], cycle[(i + 1) % len(cycle)]) for i in range(len(cycle))]
    with pytest.raises(ProvenanceCycle):
        sources_landed(new=new, live=live - new, needs=[*needs, *closing])


def test_sources_landed_a_cycle_through_stored_messages_is_no_cycle():
    # Needs into stored keys are ignored (their edges are already stored): 1 -> 2 -> 1 with 1 stored.
    assert sources_landed(new={2}, live={1}, needs=[(1, 2), (2, 1)]) == {2}


def test_sources_landed_a_100k_chain_onto_a_removed_message_taints_all_of_it_in_one_pass():
    # 0 is removed; 1..100,000 each derive from the one before. The fixpoint
    # needed a round per message (about 25 minutes); this looks at each pair twice.
    size = 100_000

    class Counted(list):
        reads = 0

        def __iter__(self):
            for pair in super().__iter__():
                Counted.reads += 1
                yield pair

    needs = Counted((key - 1, key) for key in range(1, size + 1))
    assert sources_landed(new=set(range(1, size + 1)), live=set(), needs=needs) == set()
    assert Counted.reads == size
    # With 0 live, all of it lands.
    assert sources_landed(new=set(range(1, size + 1)), live={0}, needs=needs) == set(range(1, size + 1))


# --- The real database: the recursive CTE and the deletion preview ------------------


def _store(history: History, edges: set[tuple[int, int]], transcript: set[tuple[int, int]]) -> tuple[object, list[int]]:
    """One owner holding `history` with `edges`; returns the owner and the message ids by index."""
    owner = make_user()
    threads: dict[int, object] = {}
    ids: list[int] = []
    for i in range(history.size):
        root = i
        while (up := history.parent[root]) is not None:
            root = up
        if root not in threads:
            threads[root] = make_thread(owner)
        role = "assistant" if history.chain[i] or i % 2 else "user"
        message = Message.objects.create(
            owner=owner, thread=threads[root], seq=i + 1, role=role, content=f"message {i}"
        )
        ids.append(message.pk)
    ContextEdge.objects.bulk_create(
        ContextEdge(
            owner=owner,
            source_id=ids[source],
            target_id=ids[target],
            rank=rank,
            score=0.0 if (source, target) in transcript else 0.5,
            signal=ContextEdge.Signal.TRANSCRIPT if (source, target) in transcript else ContextEdge.Signal.VECTOR,
        )
        for rank, (source, target) in enumerate(sorted(edges), 1)
    )
    return owner, ids


def _preview_removed(owner, message_id: int) -> set[int]:
    deletion = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[message_id])
    return set(deletion.matched_ids) | set(deletion.dependent_ids)


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_linear_edges_in_the_database_give_the_reference_dep_and_preview(history):
    others = retrieval_edges(history)
    reference, linear = reference_edges(history), linear_edges(history)
    with transaction.atomic():
        ref_owner, ref_ids = _store(history, reference | others, transcript=reference - others)
        lin_owner, lin_ids = _store(history, linear | others, transcript=linear - others)
        assert ContextEdge.objects.filter(owner=lin_owner).count() == len(linear | others)

        def indexes(found: set[int], ids: list[int]) -> set[int]:
            position = {pk: i for i, pk in enumerate(ids)}
            return {position[pk] for pk in found}

        for node in range(history.size):
            ref_dep = indexes(dep_ids(owner_id=ref_owner.pk, roots=[ref_ids[node]]), ref_ids)
            lin_dep = indexes(dep_ids(owner_id=lin_owner.pk, roots=[lin_ids[node]]), lin_ids)
            assert lin_dep == ref_dep == descendants(reference | others, node)
            assert indexes(_preview_removed(lin_owner, lin_ids[node]), lin_ids) == ref_dep
            assert indexes(_preview_removed(ref_owner, ref_ids[node]), ref_ids) == ref_dep
            depth_limited = dep_ids(owner_id=lin_owner.pk, roots=[lin_ids[node]], depth=1)
            assert indexes(depth_limited, lin_ids) <= indexes(
                dep_ids(owner_id=ref_owner.pk, roots=[ref_ids[node]], depth=1), ref_ids
            )
        transaction.set_rollback(True)
