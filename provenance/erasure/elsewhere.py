"""The registry's places outside the tables: statistics, WAL, files, Redis, logs."""

from provenance.erasure.indexes import INDEX_TEST
from provenance.erasure.places import (
    AT_CONFIRM,
    ERASURE_TESTS,
    IMPORT_RESIDUE_TESTS,
    SCRUB_BOUND,
    UPLOAD_TESTS,
    VACUUM_BOUND,
    Place,
    Way,
)

# Beyond the columns and indexes: what PostgreSQL, the web process, Redis and logs can keep.
ELSEWHERE = (
    Place(
        "neighbours' indexes (index_sources)",
        "a message's first words in the search vector of the turn after it, and in its vector when "
        "TURN_VECTOR_WEIGHT > 0 (chat/index/context.py)",
        Way.RECOMPUTE,
        "in the purge's transaction the writer recomputes every index whose `index_sources` holds a purged id "
        "from live turns (the search vector at once; a vector that carries its previous turn, TURN_VECTOR_WEIGHT "
        "> 0, is dropped and the follow-up embeds it again before the receipt); the receipt's `indexes` check "
        "finds no live index built from a deleted message",
        AT_CONFIRM,
        "tests/chat/index/test_index_context.py::"
        "test_purge_leaves_every_neighbour_index_as_if_never_said_and_no_word_in_pg_dump",
    ),
    Place(
        "planner statistics (pg_statistic, pg_stats)",
        "sampled values: most common values and elements, histograms",
        Way.NEVER_KEPT,
        "every text column above and every expression column of a text index has statistics target 0 "
        "(chat migrations 0002 and 0010_text_statistics_off; each new per-owner vector index at creation)",
        "never held",
        f"{ERASURE_TESTS}test_no_text_column_or_expression_gets_planner_statistics",
    ),
    Place(
        "heap and TOAST",
        "the old row versions a purge UPDATE or DELETE leaves (long values out of line in TOAST)",
        Way.VACUUM,
        "VACUUM (ANALYZE) of the owner's partition of every table above (the table where not partitioned): no "
        "tuple, live or dead, holds the text after it",
        VACUUM_BOUND,
        f"{ERASURE_TESTS}test_purged_word_leaves_every_index_and_heap_file",
    ),
    Place(
        "page free space",
        "bytes of the vacuumed row versions inside heap and TOAST pages",
        Way.PHYSICAL,
        "overwritten as later rows fill the page; `manage.py dellm_compact --owner` (VACUUM FULL of the owner's "
        "partitions, ACCESS EXCLUSIVE lock on each) or pg_repack rewrites them at once",
        "until reuse, or the next compaction",
        f"{ERASURE_TESTS}test_purged_word_leaves_every_index_and_heap_file",
    ),
    Place(
        "<index>_ccnew",
        "the half-built copy a REINDEX CONCURRENTLY cut short leaves (invalid, never used, holding text)",
        Way.DROP,
        "dropped by the next scrub before it rebuilds",
        SCRUB_BOUND,
        f"{ERASURE_TESTS}test_scrub_drops_the_copy_an_interrupted_rebuild_left",
    ),
    Place(
        "old index files",
        "the files a REINDEX replaced",
        Way.PHYSICAL,
        "unlinked by PostgreSQL (at the next checkpoint); their blocks stay in the filesystem until reused",
        "filesystem reuse (an encrypted volume bounds what a disk image shows)",
        INDEX_TEST,
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
        f"{IMPORT_RESIDUE_TESTS}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        "upload temp file",
        "an uploaded file over FILE_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) while its request runs",
        Way.NEVER_KEPT,
        "an unnamed temporary file (dellm_site/uploads.py, O_TMPFILE): never a named `.upload` file, "
        "gone with the request or a killed process",
        "the request",
        f"{UPLOAD_TESTS}test_a_large_upload_never_gets_a_named_temporary_file",
    ),
    Place(
        "request body spool (ASGI)",
        "a request body over FILE_UPLOAD_MAX_MEMORY_SIZE while Django reads it",
        Way.NEVER_KEPT,
        "Django's SpooledTemporaryFile rolls over to an unnamed temporary file: gone with the request or the process",
        "the request",
        f"{UPLOAD_TESTS}test_the_asgi_request_body_spool_has_no_name",
    ),
    Place(
        "Redis: broker, results, cache",
        "task payloads (ids), throttle counts, stream slots",
        Way.NO_TEXT,
        "tasks take ids only (a /v1 client's system prompt is a stored node, not a payload); results are ignored",
        "",
        "tests/provenance/erasure/test_residue_end_to_end.py::test_purged_secret_is_nowhere_the_application_can_reach",
    ),
    Place(
        "Redis: a /v1 turn's tools",
        "a client's tool definitions (names, descriptions, schemas: not message text, but the client's words) "
        "while its turn runs",
        Way.DELETE,
        "never in the database, a task payload or a log (chat/turns/tool_offers.py); deleted when the turn ends",
        "the turn; at most DELLM_SSE_TIMEOUT plus 60 s (the key's expiry)",
        "tests/assistant/openai/test_tool_calls.py::"
        "test_a_tool_call_reaches_the_client_its_result_goes_back_and_forgetting_the_memory_takes_them_all",
    ),
    Place(
        "Redis: pub/sub of a turn",
        "a reply's tokens while it is written",
        Way.NEVER_KEPT,
        "pub/sub delivers to the listeners of that moment and keeps nothing",
        "the turn",
        "tests/provenance/erasure/test_residue_end_to_end.py::test_purged_secret_is_nowhere_the_application_can_reach",
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
