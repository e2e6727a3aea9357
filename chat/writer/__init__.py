"""The one writer of messages, provenance edges and message statuses.

Every door stores through these functions and nothing else writes a
`Message` or `ContextEdge` row (tests/test_one_writer.py parses every module
and fails otherwise): the chat turn and its reply (`chat.services`),
regeneration (a turn like any other), redaction, undo, cancel, expiry and
purge (`provenance.services`), `/v1` (`assistant.completions`), the import
(`chat.imports`), an agent's note over MCP (`chat.services.note_store`: a
`note` with an `agent` edge from each memory the agent used, stored by
`message_store` under rule 1), `manage.py reembed`, and the lab's seeder, benches and
evaluation. The provenance rules are applied here, once:

1. **Live only if its sources are live.** A message is stored (or restored)
   live only if every message it derives from is a live message of the same
   owner, checked under the owner's lock, which deletions take too: a
   deletion either ends before the check (and the write is refused) or starts
   after the row exists (and its Dep includes it).
2. **Supplied words derive from everything before them.** A message a client
   or a file hands us as the assistant's words (a `/v1` transcript's
   assistant message, an imported reply: a *chain reply*) was written by a
   model that saw every earlier message of its conversation. If any of those
   is removed (deleted, purged, expiring ones count as live) or was itself
   not stored, it is not stored: `transcripts_store` reports it as skipped,
   whichever door it came through, and so does `graph_store` for a reply of
   DeLLM's own export that no edge of the file points at (a user or system
   message derives from nothing). Its edges are linear in size
   (`chat.lineage.transcript_sources`), with signal `transcript`.
3. **A tool result derives from the call that asked for it.** When a reply
   of DeLLM's model called a client's tools (`Message.tool_calls`), each
   result the client sends back (`role: "tool"`, by `tool_call_id`) is
   stored by `tool_results_store` with one `tool` edge from that reply, and
   only while the reply is live; the reply that then uses the results is an
   ordinary `message_store` with a `tool` edge from each. So forgetting what
   led to a tool call takes the call, its results and what used them. A
   tool step a client's transcript supplies (an assistant message with
   `tool_calls`, a `tool` message DeLLM's model did not ask for) is a chain
   reply under rule 2, like any supplied words.

Locking: every function that creates a row or changes a status takes the
owner's lock itself, inside its own `transaction.atomic()`. The lock is a
transaction-level advisory lock and re-entrant, so a caller that already
holds it (a turn commit checking its turn, a deletion holding its audit row)
keeps it and loses nothing; a transaction that holds it sends no second
statement for it (`dellm_site.locks`). `message_store`, the write of every
reply, sets no savepoint inside a caller's transaction: it writes nothing
before its sources are checked, and raises its refusal once its block is
left, so the caller's transaction goes on. Embedding updates take no lock: each is a
conditional UPDATE that leaves a removed row alone, so a purge that commits
first wins and keeps no vector (I3). The lab's bulk loaders (`messages_copy`,
`messages_index_build`, `edges_copy`, `owners_history_delete`) take none either: they load or drop
whole synthetic histories of a benchmark database, never a live one.

Indexes are derived (`chat.index_context`): a message's search vector and
vector carry its previous turn's words, and `index_sources` records which
message that was. Every write here that changes a message's previous turn
recomputes its index in the same transaction (`chat.writer.indexes`): a
store (one message gets its index in its very INSERT,
`message_insert_indexed`; and what follows a rewrite put in another's place), a removal (every
index built from a removed message, soft-deleted ones included after a
purge), a restore (the restored messages and what follows them). The search
vector is set at once; a vector built from other sources is dropped until
`chat.indexing.messages_index_embed` embeds the new index text, outside
the lock. A vector a door supplies with a new message is kept: where a
message's own words alone decide its vector (`chat.indexing.own_index_vector`),
a turn's question is embedded before it is stored and its reply before
the commit, each outside any transaction, and stored with its vector (with
an embedder that runs in the process only: a remote one is sent committed
words; a question stored inside a caller's transaction, as `/v1` does, is
embedded by its turn).

`messages_remove(purge=True)` is the one write that destroys message text
in rows; the eraser (`provenance`) calls it for every purge.

Thread rows are not the writer's: it covers messages, edges and statuses,
and only moves `updated_at` of a thread it stores into. A thread's `title`
and `source_id` are written where the thread is created or renamed
(`chat.services`, the import in `chat.imports`, `/v1` in
`assistant.completions`) and, after a purge, by the eraser
(`provenance/erasure/` calls `chat.services.purged_imports_scrub`, which
neutralises imported titles and digests their keys).
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
