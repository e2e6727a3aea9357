"""Linear edges for replies that derive from everything before them.

A reply the client or a file supplies as the assistant's words (a `/v1`
transcript's earlier reply, an imported reply) was written by a model that saw
the whole conversation before it. Its provenance is recorded conservatively:
it derives from every earlier message of its branch. Stored literally that is
one edge per earlier message, n^2/4 edges for an alternating chat of n
messages. It need not be: such a *chain reply* derives from the messages
since the previous chain reply of its branch, and from that previous chain
reply, which already derives from everything before it. The ancestors are
the same, so Dep (reachability over the edges) is the same for every message,
with at most one edge out of each message of a branch.

`sources_landed` decides which messages of a file with explicit edges
(DeLLM's export) may land: rule 1 in one linear pass.

Pure: no database. The one writer of edges stores what this returns, with
signal `transcript` (ContextEdge.Signal.TRANSCRIPT), so the API's `context`
of such a reply says what it is.
"""

from collections import defaultdict, deque
from collections.abc import Hashable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import TypeVar

from core.errors import DomainError

H = TypeVar("H", bound=Hashable)


def transcript_sources(branch: Sequence[tuple[int, bool]]) -> list[tuple[int, int]]:
    """`(source_id, target_id)` edges for the chain replies of one branch.

    `branch` is `(message id, is_chain_reply)` in conversation order. Each
    chain reply gets an edge from every message since the previous chain
    reply and from that previous chain reply (from every earlier message
    when it is the first). Other messages get no edge here (their contexts
    are recorded where they were made). Edges come in branch order, by
    target then source position; each message of the branch is the source
    of at most one of them (the next chain reply after it).

    Example: `[(1, False), (2, True), (3, False), (4, True)]` (u1, a1, u2, a2)
    -> `[(1, 2), (2, 4), (3, 4)]`.
    """
    edges: list[tuple[int, int]] = []
    since: list[int] = []
    for message_id, is_chain_reply in branch:
        if is_chain_reply:
            edges.extend((source_id, message_id) for source_id in since)
            since = []
        since.append(message_id)
    return edges


class ProvenanceCycle(DomainError):
    """Refused: the new messages' sources form a cycle, so none of them can derive from stored text first."""

    def __init__(self, count: int) -> None:
        super().__init__(
            f"The file's edges form a cycle, which {count} of its messages are on or derive from: "
            "a message cannot derive from itself.",
            fields={"edges": "form a cycle"},
        )


def sources_landed(*, new: Iterable[H], live: AbstractSet[H], needs: Iterable[tuple[H, H]]) -> set[H]:
    """The keys of `new` that may be stored: every source each one needs is `live` or lands too (rule 1).

    `needs` is `(source, target)` pairs; a pair whose target is not new is
    ignored, and a source that is neither new nor in `live` (removed,
    unknown) taints its target and, through it, everything that needs it.
    One pass in topological order (Kahn's algorithm): each pair is looked at
    twice and each key once, so a chain of 100k messages onto a removed one
    costs 100k steps, not a fixpoint's 100k rounds. Raises `ProvenanceCycle`
    if pairs among new keys form a cycle (DeLLM never writes one: a source
    always exists before what derives from it).
    """
    into: dict[H, list[H]] = defaultdict(list)
    waiting: dict[H, int] = dict.fromkeys(new, 0)
    after: dict[H, list[H]] = defaultdict(list)
    for source, target in needs:
        if target not in waiting:
            continue
        into[target].append(source)
        if source in waiting:
            waiting[target] += 1
            after[source].append(target)
    ready = deque(key for key, count in waiting.items() if count == 0)
    landed: set[H] = set()
    visited = 0
    while ready:
        key = ready.popleft()
        visited += 1
        if all(source in live or source in landed for source in into[key]):
            landed.add(key)
        for target in after[key]:
            waiting[target] -= 1
            if waiting[target] == 0:
                ready.append(target)
    if visited < len(waiting):
        raise ProvenanceCycle(len(waiting) - visited)
    return landed
