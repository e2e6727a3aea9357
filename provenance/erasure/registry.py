"""Every place a message's text or a derivative of it can live, as data.

Each `Place` says what of the text it holds, how a purge reaches it, within
what bound, and which test proves it. The eraser acts on the registry (the
scrub rebuilds the purging owners' part of every index registered `REINDEX`,
the vacuum and the compaction cover the owner's part of every table with a
text column: their partitions where a table is partitioned by owner), the
registry test (tests/provenance/erasure/test_erasure.py)
fails when a table listed here gains a column or an index that is not, or
when any other table of the database could hold text and `NO_TEXT_TABLES`
does not say why it holds no message text, and
docs/SECURITY.md's erasure timeline is this registry in words (a test checks
that it names every place and cites only tests that exist). A new column,
index, file or cache that can hold text adds its entry in the same commit."""

from provenance.erasure.columns import TEXT_COLUMNS
from provenance.erasure.elsewhere import ELSEWHERE
from provenance.erasure.indexes import INDEXES
from provenance.erasure.places import (
    ACCOUNT_ERASURE,
    AGENT_ACCESS,
    AGENT_TOKEN,
    DELETION,
    EDGE,
    FACT,
    FACT_CURSOR,
    FACT_DECLINE,
    IMPORT_JOB,
    IMPORT_UPLOAD,
    MEMORY_READ,
    MESSAGE,
    THREAD,
    TURN,
    Way,
)

# Tables that hold text, or sit next to it and must prove they do not: every
# column of each is either in TEXT_COLUMNS or in NO_TEXT_COLUMNS. Every table
# of our apps is here, each column decided.
TABLES = (
    MESSAGE,
    THREAD,
    TURN,
    EDGE,
    IMPORT_JOB,
    IMPORT_UPLOAD,
    DELETION,
    MEMORY_READ,
    AGENT_ACCESS,
    AGENT_TOKEN,
    ACCOUNT_ERASURE,
    FACT,
    FACT_DECLINE,
    FACT_CURSOR,
)

REGISTRY = (*TEXT_COLUMNS, *INDEXES, *ELSEWHERE)


def text_tables() -> list[str]:
    """Tables with a text column, chat_message first: what the vacuum after a purge covers (the owner's part)."""
    return list(dict.fromkeys(place.name.split(".")[0] for place in TEXT_COLUMNS))


def reindexed() -> list[str]:
    """The indexes the scrub rebuilds (the per-owner vector indexes are chosen by owner)."""
    return [place.name for place in INDEXES if place.way is Way.REINDEX]
