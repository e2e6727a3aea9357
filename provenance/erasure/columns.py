"""The registry's columns: every column of every table, with text or without."""

from provenance.erasure.places import (
    ACCOUNT_ERASURE,
    AGENT_ACCESS,
    AGENT_TOKEN,
    AT_CONFIRM,
    DELETION,
    EDGE,
    ERASURE_TESTS,
    FACT,
    FACT_CURSOR,
    FACT_DECLINE,
    IMPORT_JOB,
    IMPORT_RESIDUE_TESTS,
    IMPORT_UPLOAD,
    MEMORY_READ,
    MESSAGE,
    THREAD,
    TURN,
    Place,
    Way,
)

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
        "tests/provenance/erasure/test_purge_residue.py::test_purge_leaves_no_trace_in_pg_dump",
    ),
    Place(
        f"{MESSAGE}.search",
        "the text's lexemes (weight 'A') and its context's: speaker, date, the previous turn's first words ('B')",
        Way.PURGE_WRITE,
        "set to NULL with the content (the words it held of its previous turn go with it)",
        AT_CONFIRM,
        f"{ERASURE_TESTS}test_purged_word_leaves_every_index_and_heap_file",
    ),
    Place(
        f"{MESSAGE}.embedding",
        "a vector of the text",
        Way.PURGE_WRITE,
        "set to NULL (embedding_model to '')",
        AT_CONFIRM,
        "tests/provenance/erasure/test_purge_residue.py::test_purge_leaves_no_trace_in_pg_dump",
    ),
    Place(
        f"{MESSAGE}.source_id",
        "an imported message's key in the other tool (JSONL ids are any text)",
        Way.DIGEST,
        "HMAC-SHA256 under the server secret (chat/source_keys.py); the importer matches digests",
        AT_CONFIRM,
        f"{IMPORT_RESIDUE_TESTS}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{MESSAGE}.tool_calls",
        "a reply's calls of a /v1 client's tools: ids, function names and arguments (the model's words)",
        Way.PURGE_WRITE,
        "set to [] with the content (an empty list: the row stays a tool step, holding no text)",
        AT_CONFIRM,
        "tests/assistant/openai/test_tool_calls.py::"
        "test_a_tool_call_reaches_the_client_its_result_goes_back_and_forgetting_the_memory_takes_them_all",
    ),
    Place(
        f"{MESSAGE}.tool_call_id",
        "the id of the call a /v1 client's tool result answers (the model chose it)",
        Way.PURGE_WRITE,
        "set to '' with the content",
        AT_CONFIRM,
        "tests/assistant/openai/test_tool_calls.py::"
        "test_a_tool_call_reaches_the_client_its_result_goes_back_and_forgetting_the_memory_takes_them_all",
    ),
    Place(
        f"{THREAD}.title",
        "an imported conversation's title (taken from the export), or a title derived from the thread's first "
        "user message (chat/titles.py, its sources in title_sources)",
        Way.NEUTRAL,
        "an imported thread a purge touched becomes 'Imported conversation'; a derived title with a purged source is "
        "drawn again from the first surviving user message, else ''; the old versions go with the vacuum",
        AT_CONFIRM,
        f"{IMPORT_RESIDUE_TESTS}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{THREAD}.source_id",
        "an imported conversation's key (a JSONL `conversation` is any text)",
        Way.DIGEST,
        "HMAC-SHA256 under the server secret; the importer matches digests",
        AT_CONFIRM,
        f"{IMPORT_RESIDUE_TESTS}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{IMPORT_UPLOAD}.data",
        "an uploaded file, whole",
        Way.DELETE,
        "every upload of the owner deleted; a job not started yet fails: 'upload it again'",
        f"{AT_CONFIRM}; without a purge, when its job ends (a stuck job's sweep: about 70 minutes)",
        f"{IMPORT_RESIDUE_TESTS}test_purge_deletes_a_waiting_upload_and_its_job_says_upload_again",
    ),
    Place(
        f"{IMPORT_JOB}.filename",
        "the uploaded file's name",
        Way.NEUTRAL,
        "set to '' on the owner's jobs that imported into a thread the purge touched",
        AT_CONFIRM,
        f"{IMPORT_RESIDUE_TESTS}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{IMPORT_JOB}.errors",
        "conversation keys of conversations that failed (with field names and our sentences)",
        Way.DIGEST,
        "on every job of the owner, an error naming a purged conversation gets its key's digest and a field cut "
        "to its first name (the rest can be a message key)",
        AT_CONFIRM,
        f"{IMPORT_RESIDUE_TESTS}test_an_earlier_job_that_failed_the_conversation_keeps_no_key_of_it_after_the_purge",
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
        # The ids of the messages whose words the message's index carries (chat/index/context.py).
        "index_sources",
    ),
    THREAD: ("id", "owner_id", "created_at", "updated_at", "source", "title_sources"),
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
    # A fact's node is a message (its words are its `content`, erased like any message's); this row holds its
    # subject, a key of the closed list chat.subjects.SUBJECTS, never the user's words, and the user's decision.
    FACT: ("id", "owner_id", "message_id", "subject", "decision", "extractor", "created_at"),
    # A declined fact: the source message's id and the subject's key.
    FACT_DECLINE: ("id", "owner_id", "source_id", "subject", "created_at"),
    # How far extraction read (a sequence number) and the ids of messages whose extraction failed.
    FACT_CURSOR: ("owner_id", "seq", "failed", "updated_at"),
    # An agent's token: the user's own name for the client it is for (at most 100 characters), never memory.
    AGENT_TOKEN: ("id", "owner_id", "token_id", "name", "created_at"),
    # The receipt of an erased account: ids, counts by table, times.
    ACCOUNT_ERASURE: ("id", "owner_id", "actor_id", "counts", "created_at", "purge_xid", "erased_at", "scrubbed_at"),
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
        "purge_xid",
        "erased_at",
    ),
}
