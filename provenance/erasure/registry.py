"""Every place a message's text or a derivative of it can live, as data (issue 19, "one eraser").

Each `Place` says what of the text it holds, how a purge reaches it, within
what bound, and which test proves it. The eraser acts on the registry (the
scrub rebuilds the purging owners' part of every index registered `REINDEX`,
the vacuum and the compaction cover the owner's part of every table with a
text column: their partitions where a table is partitioned by owner), the
registry test (tests/provenance/test_erasure.py)
fails when a table listed here gains a column or an index that is not, or
when any other table of the database could hold text and `NO_TEXT_TABLES`
does not say why it holds no message text, and
docs/SECURITY.md's erasure timeline is this registry in words (a test checks
that it names every place and cites only tests that exist). A new column,
index, file or cache that can hold text adds its entry in the same commit.
"""

from dataclasses import dataclass
from enum import StrEnum

from chat.models import AgentAccess, ContextEdge, ImportJob, ImportUpload, MemoryRead, Message, Thread, Turn
from chat.vector_indexes import INDEX_PREFIX
from provenance.models import DeletionRequest


class Way(StrEnum):
    """How a purge reaches a place (what the eraser does about it)."""

    NO_TEXT = "holds no text"
    PURGE_WRITE = "emptied by the purge's row write"
    DIGEST = "replaced by a keyed digest"
    NEUTRAL = "replaced by a neutral text"
    DELETE = "row deleted"
    REINDEX = "index rebuilt by the scrub"
    OWNER_REINDEX = "the owner's index rebuilt by the scrub"
    DROP = "dropped by the scrub"
    VACUUM = "removed by VACUUM"
    RECOMPUTE = "recomputed from what is live"
    NEVER_KEPT = "never kept"
    PHYSICAL = "kept physically, bounded by operations"


@dataclass(frozen=True)
class Place:
    name: str
    holds: str
    way: Way
    how: str
    bound: str
    test: str  # "" only for what lies outside the application (WAL retention, backups)


MESSAGE = Message._meta.db_table
THREAD = Thread._meta.db_table
TURN = Turn._meta.db_table
EDGE = ContextEdge._meta.db_table
IMPORT_JOB = ImportJob._meta.db_table
IMPORT_UPLOAD = ImportUpload._meta.db_table
DELETION = DeletionRequest._meta.db_table
MEMORY_READ = MemoryRead._meta.db_table
AGENT_ACCESS = AgentAccess._meta.db_table

_T = "tests/provenance/test_erasure.py::"
_S = "tests/security/test_import_residue.py::"
_U = "tests/security/test_uploads.py::"
AT_CONFIRM = "at confirm (the purge's transaction)"
SCRUB_BOUND = "DELLM_SEARCH_SCRUB_INTERVAL (300 s) plus one rebuild (of one partition's index where partitioned)"
VACUUM_BOUND = "seconds after confirm (the vacuum task enqueued at commit; one partition's data)"

# Tables that hold text, or sit next to it and must prove they do not: every
# column of each is either in TEXT_COLUMNS or in NO_TEXT_COLUMNS. Every table
# of our apps is here, each column decided.
TABLES = (MESSAGE, THREAD, TURN, EDGE, IMPORT_JOB, IMPORT_UPLOAD, DELETION, MEMORY_READ, AGENT_ACCESS)

# Every other table with a column that could hold text (text, varchar, json,
# bytea, tsvector, vector): Django's, django-rest-knox's and django-axes's.
# None can hold a message's text; each says why. The registry test fails on
# a table with such a column that is neither here nor in TABLES.
_SIGN_IN = (
    "sign-in attempts (the sign-in page, the admin's, the token endpoint: the only callers of Django's "
    "authenticate): username, address, user agent, path and that request's form fields, the password masked; "
    "a sign-in carries no message"
)
NO_TEXT_TABLES = {
    "auth_user": "accounts: username, password hash, names and email; never a message",
    "auth_group": "staff groups' names",
    "auth_permission": "the names and codenames Django derives from the models",
    "knox_authtoken": "API tokens: a digest, the key's first characters, times",
    "axes_accessattempt": _SIGN_IN,
    "axes_accessfailurelog": _SIGN_IN,
    "axes_accesslog": f"{_SIGN_IN}; sign-outs and a session hash",
    "django_admin_log": (
        "staff's admin actions: an object's str() (ours name ids and statuses, never text: chat/models.py) and the "
        "changed fields' names; messages and deletions are read-only there"
    ),
    "django_content_type": "app and model names",
    "django_migrations": "migration names",
    "django_session": (
        "signed session data: the signed-in user's id, backend and hash, and the admin's notices (our sentences)"
    ),
}

TEXT_COLUMNS = (
    Place(
        f"{MESSAGE}.content",
        "the message text",
        Way.PURGE_WRITE,
        "set to '' with status purged; the row stays as a tombstone",
        AT_CONFIRM,
        "tests/provenance/test_purge_residue.py::test_purge_leaves_no_trace_in_pg_dump",
    ),
    Place(
        f"{MESSAGE}.search",
        "the text's lexemes (weight 'A') and its context's: speaker, date, the previous turn's first words ('B')",
        Way.PURGE_WRITE,
        "set to NULL with the content (the words it held of its previous turn go with it)",
        AT_CONFIRM,
        f"{_T}test_purged_word_leaves_every_index_and_heap_file",
    ),
    Place(
        f"{MESSAGE}.embedding",
        "a vector of the text",
        Way.PURGE_WRITE,
        "set to NULL (embedding_model to '')",
        AT_CONFIRM,
        "tests/provenance/test_purge_residue.py::test_purge_leaves_no_trace_in_pg_dump",
    ),
    Place(
        f"{MESSAGE}.source_id",
        "an imported message's key in the other tool (JSONL ids are any text)",
        Way.DIGEST,
        "HMAC-SHA256 under the server secret (chat/source_keys.py); the importer matches digests",
        AT_CONFIRM,
        f"{_S}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{MESSAGE}.tool_calls",
        "a reply's calls of a /v1 client's tools: ids, function names and arguments (the model's words)",
        Way.PURGE_WRITE,
        "set to [] with the content (an empty list: the row stays a tool step, holding no text)",
        AT_CONFIRM,
        "tests/worker/test_tool_calls.py::"
        "test_a_tool_call_reaches_the_client_its_result_goes_back_and_forgetting_the_memory_takes_them_all",
    ),
    Place(
        f"{MESSAGE}.tool_call_id",
        "the id of the call a /v1 client's tool result answers (the model chose it)",
        Way.PURGE_WRITE,
        "set to '' with the content",
        AT_CONFIRM,
        "tests/worker/test_tool_calls.py::"
        "test_a_tool_call_reaches_the_client_its_result_goes_back_and_forgetting_the_memory_takes_them_all",
    ),
    Place(
        f"{THREAD}.title",
        "an imported conversation's title (taken from the export)",
        Way.NEUTRAL,
        "an imported thread a purge touched becomes 'Imported conversation'",
        AT_CONFIRM,
        f"{_S}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{THREAD}.source_id",
        "an imported conversation's key (a JSONL `conversation` is any text)",
        Way.DIGEST,
        "HMAC-SHA256 under the server secret; the importer matches digests",
        AT_CONFIRM,
        f"{_S}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{IMPORT_UPLOAD}.data",
        "an uploaded file, whole",
        Way.DELETE,
        "every upload of the owner deleted; a job not started yet fails: 'upload it again'",
        f"{AT_CONFIRM}; without a purge, when its job ends (a stuck job's sweep: about 70 minutes)",
        f"{_S}test_purge_deletes_a_waiting_upload_and_its_job_says_upload_again",
    ),
    Place(
        f"{IMPORT_JOB}.filename",
        "the uploaded file's name",
        Way.NEUTRAL,
        "set to '' on the owner's jobs that imported into a thread the purge touched",
        AT_CONFIRM,
        f"{_S}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{IMPORT_JOB}.errors",
        "conversation keys of conversations that failed (with field names and our sentences)",
        Way.DIGEST,
        "on every job of the owner, an error naming a purged conversation gets its key's digest and a field cut "
        "to its first name (the rest can be a message key)",
        AT_CONFIRM,
        f"{_S}test_an_earlier_job_that_failed_the_conversation_keeps_no_key_of_it_after_the_purge",
    ),
)

# Columns that hold ids, counts, statuses, times or our own sentences: never message text.
NO_TEXT_COLUMNS = {
    MESSAGE: (
        "id",
        "owner_id",
        "thread_id",
        "seq",
        "role",
        "embedding_model",
        "status",
        "deleted_by_id",
        "expires_at",
        "replaces",
        "place",
        "created_at",
        "updated_at",
        "imported_from",
        "source_created_at",
        # The ids of the messages whose words the message's index carries (chat/index_context.py).
        "index_sources",
    ),
    THREAD: ("id", "owner_id", "created_at", "updated_at", "source"),
    # `signal` is the kind of evidence (vector, lexical, ...), one of our choices.
    EDGE: ("id", "owner_id", "source_id", "target_id", "rank", "score", "signal"),
    # `error` is our sentence for humans (turn_fail), never message text.
    TURN: (
        "id",
        "owner_id",
        "user_message_id",
        "reply_id",
        "status",
        "error",
        "attempts",
        "policy",
        "replaces",
        "deletion_id",
        # The system prompt node the turn was asked under: an id; the text is the node's own row.
        "system_message_id",
        # The tool call whose results the turn answers: an id.
        "tool_call_id",
        "created_at",
        "updated_at",
    ),
    IMPORT_JOB: (
        "id",
        "owner_id",
        "status",
        "format",
        "conversations_total",
        "conversations_done",
        "conversations_failed",
        "messages_total",
        "messages_done",
        "messages_imported",
        "messages_skipped",
        "edges_created",
        "threads",
        "error",
        "created_at",
        "started_at",
        "finished_at",
    ),
    IMPORT_UPLOAD: ("job_id",),
    # The MCP read log: which ids a client was shown, the client's own name for itself (its MCP
    # `clientInfo`, capped at 100 characters), the tool and the time; never what it read.
    MEMORY_READ: ("id", "owner_id", "client", "tool", "message_ids", "read_at"),
    AGENT_ACCESS: ("owner_id", "may_confirm_deletions", "updated_at"),
    # Ids, counts, kinds and receipts: never the deleted text nor the query that matched it.
    DELETION: (
        "id",
        "owner_id",
        "actor_id",
        "confirmed_by_id",
        "selector",
        "resolved_selector",
        "threshold",
        "mode",
        "depth",
        "expire_at",
        "derived",
        "matched_ids",
        "dependent_ids",
        "deleted_ids",
        "regenerate_ids",
        "redacted",
        "regeneration_cancelled_at",
        "regeneration_finished_at",
        "status",
        "explanations",
        "outcome",
        "created_at",
        "confirmed_at",
        "executed_at",
        "undone_at",
        "undo_removed_ids",
        "receipt",
        "verified_at",
        "scrubbed_at",
    ),
}

_REINDEXED = (
    "rebuilt with REINDEX INDEX CONCURRENTLY after a purge: the purging owners' partitions' indexes where the table "
    "is hash-partitioned by owner_id, the whole index where it is not"
)
_INDEX_TEST = f"{_T}test_purged_word_leaves_every_index_and_heap_file"


def _no_text_index(name: str) -> Place:
    return Place(name, "", Way.NO_TEXT, "ids, statuses, times", "", f"{_T}test_registry_names_every_index")


INDEXES = (
    Place("message_search_gin", "the lexemes of every message", Way.REINDEX, _REINDEXED, SCRUB_BOUND, _INDEX_TEST),
    Place(
        "message_owner_search_gin",
        "the lexemes of every message, per owner (expression index, chat migration 0004; its pending list of at most "
        "64 kB, migration 0019, is rebuilt with it)",
        Way.REINDEX,
        _REINDEXED,
        SCRUB_BOUND,
        _INDEX_TEST,
    ),
    Place(
        "message_thread_source_unique",
        "imported messages' keys",
        Way.REINDEX,
        _REINDEXED,
        SCRUB_BOUND,
        f"{_S}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        "thread_owner_source_unique",
        "imported conversations' keys",
        Way.REINDEX,
        _REINDEXED,
        SCRUB_BOUND,
        f"{_S}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{INDEX_PREFIX}*",
        "per-owner IVFFlat indexes, on the owner's partition when the table is partitioned (chat/vector_indexes.py): "
        "a copy of each vector in its list (the vacuum drops a purged one's entry; its bytes stay in the page) and "
        "the centroids, means of that owner's vectors when it was built",
        Way.OWNER_REINDEX,
        "the index of every owner who purged since the last scrub is rebuilt (lists and centroids from live vectors)",
        SCRUB_BOUND,
        f"{_T}test_scrub_rebuilds_the_vector_index_of_an_owner_who_purged",
    ),
    *(
        _no_text_index(name)
        for name in (
            f"{MESSAGE}_pkey",
            "message_owner_status_seq",
            "message_thread_seq",
            "message_thread_place",
            "message_index_sources_gin",
            "message_owner_seq_unique",
            "message_deleted_by",
            f"{THREAD}_pkey",
            "thread_owner_recent",
            "chat_thread_owner_id_5b1cabf2",
            f"{TURN}_pkey",
            "turn_owner_status",
            "chat_turn_owner_id_a2df9e0e",
            "chat_turn_user_message_id_a7aeaa52",
            "chat_turn_reply_id_70226093",
            "chat_turn_deletion_id_ea51200c",
            "chat_turn_system_message_id_32a47c85",
            "chat_turn_tool_call_id_2c5678f1",
            f"{EDGE}_pkey",
            "edge_source_target_unique",
            "edge_target",
            "chat_contextedge_owner_id_7b8ee961",
            f"{IMPORT_JOB}_pkey",
            "import_owner_recent",
            "chat_importjob_owner_id_f7ba38c9",
            f"{IMPORT_UPLOAD}_pkey",
            f"{DELETION}_pkey",
            "deletion_owner_recent",
            "deletion_due",
            "deletion_unscrubbed",
            "provenance_deletionrequest_owner_id_bbcc5a2a",
            "provenance_deletionrequest_actor_id_23fa57c2",
            "provenance_deletionrequest_confirmed_by_id_f48dd9b2",
            f"{MEMORY_READ}_pkey",
            "memoryread_message_ids",
            "chat_memoryread_owner_id_bcc55e52",
            f"{AGENT_ACCESS}_pkey",
        )
    ),
)

# Beyond the columns and indexes: what PostgreSQL, the web process, Redis and logs can keep.
ELSEWHERE = (
    Place(
        "neighbours' indexes (index_sources)",
        "a message's first words in the search vector of the turn after it, and in its vector when "
        "TURN_VECTOR_WEIGHT > 0 (chat/index_context.py)",
        Way.RECOMPUTE,
        "in the purge's transaction the writer recomputes every index whose `index_sources` holds a purged id "
        "from live turns (the search vector at once; a vector that carries its previous turn, TURN_VECTOR_WEIGHT "
        "> 0, is dropped and the follow-up embeds it again before the receipt); the receipt's `indexes` check "
        "finds no live index built from a deleted message",
        AT_CONFIRM,
        "tests/chat/test_index_context.py::"
        "test_purge_leaves_every_neighbour_index_as_if_never_said_and_no_word_in_pg_dump",
    ),
    Place(
        "planner statistics (pg_statistic, pg_stats)",
        "sampled values: most common values and elements, histograms",
        Way.NEVER_KEPT,
        "every text column above and every expression column of a text index has statistics target 0 "
        "(chat migrations 0002 and 0010_text_statistics_off; each new per-owner vector index at creation)",
        "never held",
        f"{_T}test_no_text_column_or_expression_gets_planner_statistics",
    ),
    Place(
        "heap and TOAST",
        "the old row versions a purge UPDATE or DELETE leaves (long values out of line in TOAST)",
        Way.VACUUM,
        "VACUUM (ANALYZE) of the owner's partition of every table above (the table where not partitioned): no "
        "tuple, live or dead, holds the text after it",
        VACUUM_BOUND,
        f"{_T}test_purged_word_leaves_every_index_and_heap_file",
    ),
    Place(
        "page free space",
        "bytes of the vacuumed row versions inside heap and TOAST pages",
        Way.PHYSICAL,
        "overwritten as later rows fill the page; `manage.py dellm_compact --owner` (VACUUM FULL of the owner's "
        "partitions, ACCESS EXCLUSIVE lock on each) or pg_repack rewrites them at once",
        "until reuse, or the next compaction",
        f"{_T}test_purged_word_leaves_every_index_and_heap_file",
    ),
    Place(
        "<index>_ccnew",
        "the half-built copy a REINDEX CONCURRENTLY cut short leaves (invalid, never used, holding text)",
        Way.DROP,
        "dropped by the next scrub before it rebuilds",
        SCRUB_BOUND,
        f"{_T}test_scrub_drops_the_copy_an_interrupted_rebuild_left",
    ),
    Place(
        "old index files",
        "the files a REINDEX replaced",
        Way.PHYSICAL,
        "unlinked by PostgreSQL (at the next checkpoint); their blocks stay in the filesystem until reused",
        "filesystem reuse (an encrypted volume bounds what a disk image shows)",
        _INDEX_TEST,
    ),
    Place(
        "WAL",
        "records of the rows as written and as purged",
        Way.PHYSICAL,
        "recycled after checkpoints (max_wal_size, wal_keep_size, replication slots, archiving decide)",
        "checkpoint plus WAL retention; archives by their retention policy",
        "",
    ),
    Place(
        "PostgreSQL's server log",
        "a failing statement (placeholders only: log_parameter_max_length_on_error is 0 by default) and the DETAIL "
        "of a unique violation, which names the key (an imported key)",
        Way.PHYSICAL,
        "the server's log rotation; log_error_verbosity = terse leaves DETAIL out",
        "your log retention",
        "",
    ),
    Place(
        "backups", "whatever they copied before the purge", Way.PHYSICAL, "your retention policy", "backup expiry", ""
    ),
    Place(
        "a running import",
        "the parsed file, in the memory of the worker running its job",
        Way.NEVER_KEPT,
        "kept until the job ends; it matches digests like any import, so purged messages stay purged",
        "the job",
        f"{_S}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        "upload temp file",
        "an uploaded file over FILE_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) while its request runs",
        Way.NEVER_KEPT,
        "an unnamed temporary file (dellm_site/uploads.py, O_TMPFILE): never a named `.upload` file, "
        "gone with the request or a killed process",
        "the request",
        f"{_U}test_a_large_upload_never_gets_a_named_temporary_file",
    ),
    Place(
        "request body spool (ASGI)",
        "a request body over FILE_UPLOAD_MAX_MEMORY_SIZE while Django reads it",
        Way.NEVER_KEPT,
        "Django's SpooledTemporaryFile rolls over to an unnamed temporary file: gone with the request or the process",
        "the request",
        f"{_U}test_the_asgi_request_body_spool_has_no_name",
    ),
    Place(
        "Redis: broker, results, cache",
        "task payloads (ids), throttle counts, stream slots",
        Way.NO_TEXT,
        "tasks take ids only (a /v1 client's system prompt is a stored node, not a payload); results are ignored",
        "",
        "tests/admin/test_residue.py::test_purged_secret_is_nowhere_the_application_can_reach",
    ),
    Place(
        "Redis: a /v1 turn's tools",
        "a client's tool definitions (names, descriptions, schemas: not message text, but the client's words) "
        "while its turn runs",
        Way.DELETE,
        "never in the database, a task payload or a log (chat/turn_tools.py); the key is deleted when the turn ends",
        "the turn; at most DELLM_SSE_TIMEOUT plus 60 s (the key's expiry)",
        "tests/worker/test_tool_calls.py::"
        "test_a_tool_call_reaches_the_client_its_result_goes_back_and_forgetting_the_memory_takes_them_all",
    ),
    Place(
        "Redis: pub/sub of a turn",
        "a reply's tokens while it is written",
        Way.NEVER_KEPT,
        "pub/sub delivers to the listeners of that moment and keeps nothing",
        "the turn",
        "tests/admin/test_residue.py::test_purged_secret_is_nowhere_the_application_can_reach",
    ),
    Place(
        "logs",
        "nothing: ids, exception classes, SQLSTATE codes",
        Way.NO_TEXT,
        "the WithholdText filter on every handler",
        "",
        "tests/dellm_site/test_logging_config.py::test_every_handler_of_every_logger_withholds_text",
    ),
)

REGISTRY = (*TEXT_COLUMNS, *INDEXES, *ELSEWHERE)


def text_tables() -> list[str]:
    """Tables with a text column, chat_message first: what the vacuum after a purge covers (the owner's part)."""
    return list(dict.fromkeys(place.name.split(".")[0] for place in TEXT_COLUMNS))


def reindexed() -> list[str]:
    """The indexes the scrub rebuilds (the per-owner vector indexes are chosen by owner)."""
    return [place.name for place in INDEXES if place.way is Way.REINDEX]
