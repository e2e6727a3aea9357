"""The registry's indexes: every index of every table, and how a purge scrubs those that hold text."""

from chat.index.vectors import INDEX_PREFIX
from provenance.erasure.places import (
    ACCOUNT_ERASURE,
    AGENT_ACCESS,
    AGENT_TOKEN,
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
    SCRUB_BOUND,
    THREAD,
    TURN,
    Place,
    Way,
)

_REINDEXED = (
    "rebuilt with REINDEX INDEX CONCURRENTLY after a purge: the purging owners' partitions' indexes where the table "
    "is hash-partitioned by owner_id, the whole index where it is not"
)
INDEX_TEST = f"{ERASURE_TESTS}test_purged_word_leaves_every_index_and_heap_file"


def _no_text_index(name: str) -> Place:
    return Place(name, "", Way.NO_TEXT, "ids, statuses, times", "", f"{ERASURE_TESTS}test_registry_names_every_index")


INDEXES = (
    Place("message_search_gin", "the lexemes of every message", Way.REINDEX, _REINDEXED, SCRUB_BOUND, INDEX_TEST),
    Place(
        "message_owner_search_gin",
        "the lexemes of every message, per owner (expression index, chat migration 0004; its pending list of at most "
        "64 kB, migration 0019, is rebuilt with it)",
        Way.REINDEX,
        _REINDEXED,
        SCRUB_BOUND,
        INDEX_TEST,
    ),
    Place(
        "message_thread_source_unique",
        "imported messages' keys",
        Way.REINDEX,
        _REINDEXED,
        SCRUB_BOUND,
        f"{IMPORT_RESIDUE_TESTS}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        "thread_owner_source_unique",
        "imported conversations' keys",
        Way.REINDEX,
        _REINDEXED,
        SCRUB_BOUND,
        f"{IMPORT_RESIDUE_TESTS}test_purge_of_an_imported_conversation_leaves_no_text",
    ),
    Place(
        f"{INDEX_PREFIX}*",
        "per-owner IVFFlat indexes, on the owner's partition when the table is partitioned (chat/index/vectors.py): "
        "a copy of each vector in its list (the vacuum drops a purged one's entry; its bytes stay in the page) and "
        "the centroids, means of that owner's vectors when it was built",
        Way.OWNER_REINDEX,
        "the index of every owner who purged since the last scrub is rebuilt (lists and centroids from live vectors)",
        SCRUB_BOUND,
        f"{ERASURE_TESTS}test_scrub_rebuilds_the_vector_index_of_an_owner_who_purged",
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
            f"{FACT}_pkey",
            "chat_fact_message_id_key",
            "chat_fact_owner_id_eeca83cd",
            "fact_owner_subject",
            f"{FACT_DECLINE}_pkey",
            "chat_factdecline_owner_id_5215eba5",
            "factdecline_unique",
            f"{FACT_CURSOR}_pkey",
            f"{AGENT_TOKEN}_pkey",
            f"{AGENT_TOKEN}_token_id_key",
            "assistant_agenttoken_owner_id_27cf9eb6",
            "assistant_agenttoken_token_id_582bdebb_like",
            f"{ACCOUNT_ERASURE}_pkey",
        )
    ),
)
