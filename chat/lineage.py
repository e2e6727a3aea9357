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

Pure: no database. The one writer of edges stores what this returns, with
signal `transcript` (ContextEdge.Signal.TRANSCRIPT), so the API's `context`
of such a reply says what it is.
"""

from collections.abc import Sequence


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
