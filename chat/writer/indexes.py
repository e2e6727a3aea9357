"""Writing messages' indexes: search vectors, `index_sources` and index vectors (see `chat.writer`).

A message's index is derived from its previous turn too
(`chat.index.context`), so every write that changes which turn precedes a
message recomputes that message's index in the same transaction: storing a
message (its own index, and, for a rewrite put in another's place, the one
after it), removing messages (every index built from them) and restoring
them (theirs and the ones after them). The search vector is recomputed in
SQL at once; a vector built from other sources (when vectors carry the
previous turn: TURN_VECTOR_WEIGHT > 0) is dropped (the message leaves
similarity retrieval) until `chat.writer.vectors.messages_index_embed` embeds the
new index, after the transaction (embedding is slow and may
be a network call: never under the owner's lock).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import CharField, Field

from chat.index.context import (
    INDEX_CONTEXT_SQL,
    INDEX_ROWS_SQL,
    INDEX_SOURCES_SQL,
    PREVIOUS_TURN_JOIN_SQL,
    TURN_VECTOR_WEIGHT,
    index_params,
    lookup_cursor,
)
from chat.index.vectors import vector_literal
from chat.models import Message

_TABLE = Message._meta.db_table

# One new message with its index, in its INSERT: the row `m` is the values
# given, its previous turn found and its search vector and sources computed
# as INDEX_ROWS_SQL and _REFRESH_SQL do for a stored row. Writing the row
# once, not inserting it and then updating its index, spares a second
# version of it in the table and in every index (the per-owner vector index
# included): a turn's reply took 1.2 ms for that update.
_INDEXED = ("search", "index_sources")
_FIELDS = [
    (f, f.column) for f in Message._meta.concrete_fields if f.column and not f.primary_key and f.attname not in _INDEXED
]
_COLUMNS = ", ".join(column for _, column in _FIELDS)
_INSERT_SQL = f"""
INSERT INTO {_TABLE} ({_COLUMNS}, search, index_sources)
SELECT {", ".join(f"m.{column}" for _, column in _FIELDS)},
       setweight(to_tsvector('english', m.content), 'A')
       || setweight(to_tsvector('english', {INDEX_CONTEXT_SQL}), 'B'),
       {INDEX_SOURCES_SQL}
FROM (VALUES (__VALUES__)) AS m({_COLUMNS})
{PREVIOUS_TURN_JOIN_SQL}
RETURNING id, index_sources
"""


@cache
def _insert_sql() -> str:
    # Each value cast to its column's type, as VALUES in a SELECT does not
    # take the column's; text without a length (a cast to varchar(n) would
    # cut it), so a value too long is refused by the INSERT, as by Django's.
    return _INSERT_SQL.replace("__VALUES__", ", ".join(f"%(v_{column})s::{_cast(f)}" for f, column in _FIELDS))


def _cast(field: Field) -> str:
    if isinstance(field, CharField):
        return connection.ops.cast_char_field_without_max_length
    cast = field.cast_db_type(connection)
    assert cast is not None  # a concrete field has a column type
    return cast


def message_insert_indexed(message: Message) -> None:
    """INSERT the new `message` of its owner with its index (search vector, `index_sources`); it takes its id.

    Caller holds the owner's lock, in its transaction. Its vector, if it has
    one, is kept (as for `fresh` rows of `indexes_refresh`).
    """
    values = {f"v_{column}": f.get_db_prep_save(f.pre_save(message, True), connection) for f, column in _FIELDS}
    params = {**values, **index_params(owner_id=message.owner_id, ids=())}
    with lookup_cursor() as cursor:
        cursor.execute(_insert_sql(), params)
        message.pk, message.index_sources = cursor.fetchone()
    message._state.adding, message._state.db = False, connection.alias


# The own words' part (weight 'A') is kept from the stored vector: only the
# context changes here, a message's content never does (a purge empties both
# and is never refreshed), and re-parsing the text of the 9,500 neighbours a
# purge of 10,000 rewrites cost about 60 ms of it. A row not indexed yet (null)
# parses its content. `fresh`: rows this transaction inserted, whose vector (if the door supplied
# one) is kept. Any other row whose sources changed loses its vector, if its
# vector carries its previous turn (`vectors`: TURN_VECTOR_WEIGHT > 0).
_REFRESH_SQL = f"""
WITH c AS MATERIALIZED ({INDEX_ROWS_SQL})
UPDATE {_TABLE} AS m
SET search = coalesce(ts_filter(m.search, '{{a}}'), setweight(to_tsvector('english', m.content), 'A'))
             || setweight(to_tsvector('english', c.context), 'B'),
    index_sources = c.sources,
    embedding = CASE WHEN c.index_sources <> c.sources AND NOT (m.id = ANY(%(fresh)s)) AND %(vectors)s
                THEN NULL ELSE m.embedding END,
    embedding_model = CASE WHEN c.index_sources <> c.sources AND NOT (m.id = ANY(%(fresh)s)) AND %(vectors)s
                      THEN '' ELSE m.embedding_model END
FROM c
WHERE m.owner_id = %(owner)s AND m.id = c.id
RETURNING m.id, c.index_sources <> c.sources AND NOT (m.id = ANY(%(fresh)s))
"""


def indexes_refresh(*, owner_id: int, ids: Iterable[int], fresh: Iterable[int] = ()) -> list[int]:
    """Recompute the search vector and sources of the owner's messages `ids` (not purged); those whose sources changed.

    Caller holds the owner's lock, in its transaction. Where a vector carries
    the previous turn (TURN_VECTOR_WEIGHT > 0), those ids' vectors are gone
    (`chat.writer.vectors.messages_index_embed` embeds them again), except for
    `fresh` rows.
    """
    wanted = sorted(set(ids))
    if not wanted:
        return []
    with lookup_cursor() as cursor:
        params = {
            **index_params(owner_id=owner_id, ids=wanted),
            "fresh": sorted(set(fresh)),
            "vectors": TURN_VECTOR_WEIGHT > 0,
        }
        cursor.execute(_REFRESH_SQL, params)
        return sorted(pk for pk, changed in cursor.fetchall() if changed)


# Only where the index is still the one embedded: a message purged, edited
# or given other sources since its text was read keeps no stale vector.
_INDEX_EMBEDDINGS_SQL = f"""
UPDATE {_TABLE} AS m
SET embedding = u.embedding::vector, embedding_model = %(model)s, updated_at = now()
FROM unnest(%(ids)s::bigint[], %(embeddings)s::text[], %(digests)s::text[], %(sources)s::text[])
     AS u(id, embedding, digest, sources)
WHERE m.owner_id = %(owner)s AND m.id = u.id AND m.status <> 'purged'
  AND sha256(convert_to(m.content, 'UTF8')) = decode(u.digest, 'hex')
  AND m.index_sources = u.sources::bigint[]
  AND (NOT %(missing_only)s OR m.embedding IS NULL)
"""


def messages_index_embeddings_set(
    *,
    owner_id: int,
    rows: Sequence[tuple[int, str, Sequence[int], list[float] | None]],
    model: str,
    missing_only: bool,
) -> int:
    """Store the owner's index vectors `(id, content, sources, vector)` read and embedded since; how many were stored.

    A row is written only if it is not purged and its content and sources are still
    those embedded (and, with `missing_only`, has no vector), so a deletion
    that committed meanwhile wins. A text the model cannot embed gets none.
    No lock: a conditional UPDATE, like `messages_embeddings_set`.
    """
    kept = [row for row in rows if row[3] is not None]
    if not kept:
        return 0
    params: dict[str, Any] = {
        "owner": owner_id,
        "ids": [pk for pk, _, _, _ in kept],
        "embeddings": [vector_literal(vector) for _, _, _, vector in kept if vector is not None],
        # The text's digest, not the text: sent back whole, a batch of long messages was copied again.
        "digests": [hashlib.sha256(content.encode()).hexdigest() for _, content, _, _ in kept],
        "sources": ["{" + ",".join(str(s) for s in sources) + "}" for _, _, sources, _ in kept],
        "model": model,
        "missing_only": missing_only,
    }
    with connection.cursor() as cursor:
        cursor.execute(_INDEX_EMBEDDINGS_SQL, params)
        return cursor.rowcount
