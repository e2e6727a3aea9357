"""Linear provenance for replies that derive from everything before them in their conversation.

A chain reply is a message a client or a file hands DeLLM as the assistant's
words (a `/v1` transcript's assistant message, an imported reply): the model
that wrote it saw every earlier message of its conversation. Recording that as
an edge from every earlier message costs n^2/4 edges for n messages. Instead,
each chain reply gets an edge from every message since the previous chain
reply of its branch and one from that previous chain reply: since the previous
one already has every message before it among its ancestors (by induction),
the ancestors, hence Dep, are exactly those of the n^2 rule, with about two
edges per message.
"""

from collections.abc import Sequence


def transcript_sources(branch: Sequence[tuple[int, bool]]) -> list[tuple[int, int]]:
    """The `(source_id, target_id)` edges of the chain replies in `branch`.

    `branch` is `(message id, is_chain_reply)` in conversation order. Each chain
    reply derives from the previous chain reply (if any) and from every message
    after it, up to the reply itself. Linear in the branch's length.
    """
    pairs: list[tuple[int, int]] = []
    previous: int | None = None
    since: list[int] = []
    for message_id, chain in branch:
        if chain:
            if previous is not None:
                pairs.append((previous, message_id))
            pairs += [(source, message_id) for source in since]
            previous, since = message_id, []
        else:
            since.append(message_id)
    return pairs
