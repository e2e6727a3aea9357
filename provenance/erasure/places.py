"""What a place of the erasure registry is: where text lives, how it is erased, within what bound."""

from dataclasses import dataclass
from enum import StrEnum

from chat.models import (
    AgentAccess,
    ContextEdge,
    Fact,
    FactCursor,
    FactDecline,
    ImportJob,
    ImportUpload,
    MemoryRead,
    Message,
    Thread,
    Turn,
)
from provenance.models import AccountErasure, DeletionRequest


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
# assistant's table, by name: provenance sits below the doors and never imports them.
AGENT_TOKEN = "assistant_agenttoken"
ACCOUNT_ERASURE = AccountErasure._meta.db_table
FACT = Fact._meta.db_table
FACT_DECLINE = FactDecline._meta.db_table
FACT_CURSOR = FactCursor._meta.db_table

ERASURE_TESTS = "tests/provenance/erasure/test_erasure.py::"
IMPORT_RESIDUE_TESTS = "tests/chat/imports/test_import_residue.py::"
UPLOAD_TESTS = "tests/dellm_site/test_uploads.py::"
AT_CONFIRM = "at confirm (the purge's transaction)"
SCRUB_BOUND = "DELLM_SEARCH_SCRUB_INTERVAL (300 s) plus one rebuild (of one partition's index where partitioned)"
VACUUM_BOUND = (
    "seconds after confirm, or after the oldest snapshot open at confirm closes (`erased_at` says when; "
    "one partition's data)"
)
