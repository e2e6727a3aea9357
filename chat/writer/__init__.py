"""The one writer of messages, provenance edges and message statuses.

Every door (the chat turn, regeneration, redaction, undo, cancel, expiry,
purge, `/v1`, the import, an agent's note, `manage.py reembed`, the lab)
stores through these functions, which apply the provenance rules once under
the owner's lock: a message is live only if what it derives from is live;
supplied words (a chain reply) derive from everything before them; a tool
result derives from the call that asked for it. Every write that changes a
message's previous turn recomputes its derived index in the same transaction.
`tests/chat/writer/test_one_writer.py` fails on any other writer.
The rules, locking and indexes in full: docs/subsystems/writer.md.
"""

from chat.writer.bulk import edges_copy, messages_copy, messages_index_build, owners_history_delete
from chat.writer.indexes import indexes_refresh, messages_index_embeddings_set
from chat.writer.messages import (
    Branch,
    GraphEdge,
    GraphMessage,
    Source,
    SourcesRemoved,
    Stored,
    Supplied,
    edges_add,
    graph_store,
    message_rewrite,
    message_store,
    tool_results_store,
    transcripts_store,
)
from chat.writer.statuses import (
    messages_expiring_clear,
    messages_expiring_mark,
    messages_remove,
    messages_restore,
    messages_source_keys_digest,
)

__all__ = [
    "Branch",
    "GraphEdge",
    "GraphMessage",
    "Source",
    "SourcesRemoved",
    "Stored",
    "Supplied",
    "edges_add",
    "edges_copy",
    "graph_store",
    "indexes_refresh",
    "message_rewrite",
    "message_store",
    "messages_copy",
    "messages_expiring_clear",
    "messages_expiring_mark",
    "messages_index_build",
    "messages_index_embeddings_set",
    "messages_remove",
    "messages_restore",
    "messages_source_keys_digest",
    "owners_history_delete",
    "tool_results_store",
    "transcripts_store",
]
