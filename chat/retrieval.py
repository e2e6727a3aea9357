"""Hybrid context retrieval: pgvector similarity and PostgreSQL full text, fused per owner in SQL.

Why two signals: a question rarely says what its answer said. Embeddings
find paraphrases ("my job" for "I work as a nurse"); words find the names,
places and rare terms that a small embedder blurs ("When did Caroline go to
the LGBTQ support group?"). Each signal ranks its own candidates and the two
rankings are fused by reciprocal-rank fusion (RRF), which needs no common
score scale: cosine similarities and BM25 sums are not comparable.

The lexical signal is a BM25-like score over the existing `search` column
(GIN): the question's lexemes (english config, so stop words and question
words are already gone) are ORed, never ANDed (a natural question ANDed
matches nothing), and each matched lexeme weighs its inverse document
frequency in this owner's history, so "caroline" in every message counts
for little and "lgbtq" for much. The rarest lexemes are matched, within a
budget of rows (`MATCH_BUDGET`); the commonest are this owner's stop words.

Nothing the user typed is interpolated into SQL: the question's text is a
bound parameter, its lexemes come back from `to_tsvector`, only lexemes made
of letters and digits are kept (checked in Python, linear time), and the OR
query is built from them and bound as a parameter.

The threshold keeps unrelated messages out: a fused candidate enters the
context only if it passes at least one signal's own floor, the cosine
threshold for the vector signal or `lexical_floor` (the share of the
question's IDF mass it matches) for the lexical one.
"""

import math
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from chat.llm import ContextItem
from chat.models import Message
from chat.vector_indexes import embedding_cast

LIVE = [str(s) for s in Message.LIVE]
# A system prompt is an input of the replies it shaped, never a memory: no query here returns one.
SYSTEM = str(Message.Role.SYSTEM)
# Nor is a tool step (a reply's tool calls, a client's tool result): it is provenance, not memory (docs/OPENAI.md).
TOOL = str(Message.Role.TOOL)

# Candidates each signal contributes before fusion.
CANDIDATES = 40
# RRF's constant. 60 is the original paper's (Cormack et al. 2009) for
# lists of 1,000 documents; over 40 candidates a side and a top-5, 10 did as
# well or better on both the CM benchmark and TOFU (lab/README.md, "Retrieval quality").
RRF_K = 10
# The lexical side reads at most about this many messages: the question's
# lexemes are taken rarest first while their document frequencies add up to
# no more than this; the rest are this owner's stop words (low IDF, and
# scanning their postings is what would make a 100k-message history slow:
# about 20 us a matched row on a loaded 2-core machine). Counts stop there too.
MATCH_BUDGET = 1000
# Lexemes matched at most: the rarest of the question's.
MATCH_LEXEMES = 12
# Recent messages in which document frequencies are counted (see _DF_SQL).
DF_WINDOW = 1000
# Lexemes of the question used at most (a question is short; a pasted page is not).
MAX_LEXEMES = 32
# BM25's length normalisation, for binary term frequencies (chat messages are
# short: a word seldom repeats). k1 and b as in Robertson's defaults.
BM25_K1 = 1.2
BM25_B = 0.75
# Share of the question's IDF mass a message must match to pass on words
# alone (lab/README.md, "Retrieval quality", has the measurement; DELLM_LEXICAL_FLOOR).
LEXICAL_FLOOR = 0.35

# A past question states no fact (the responder never quotes one either), so
# it ranks below statements that match as well: its fused score is scaled.
QUESTION_WEIGHT = 0.5


@dataclass(frozen=True)
class QueryTerms:
    """The question's lexemes with their IDF in the owner's history."""

    lexemes: list[str]
    idf: list[float]
    # Mean lexemes per message (BM25's length normalisation), over the recent window.
    avg_len: float = 1.0

    @property
    def mass(self) -> float:
        return sum(self.idf)


_LEXEMES_SQL = "SELECT tsvector_to_array(to_tsvector('english', %(text)s))"

# The full-text index is per owner: a GIN index over the message's search
# vector plus one token that names its owner, "#<owner id>" (the english
# parser never makes a lexeme with "#"). A query ANDs that token with its
# words, so the index returns only this owner's matches, however common the
# words are in other owners' histories. PostgreSQL's GIN has no
# multi-column (owner, search) form without the btree_gin extension, which
# the embedded server does not ship; this is the same index by other means.
OWNER_SEARCH = "(array_to_tsvector(ARRAY['#' || owner_id::text]) || search)"


def _owner_tsquery(owner_id: int, lexemes: list[str]) -> str:
    # Safe to build: an integer and alphanumeric lexemes only, each quoted.
    words = " | ".join(f"'{lexeme}'" for lexeme in lexemes)
    return f"'#{int(owner_id)}' & ({words})"


# Document frequencies, bounded in cost whatever the history's size: each
# lexeme is counted in the owner's last DF_WINDOW messages (one short index
# scan, exact for smaller histories) and scaled to the whole history. A
# lexeme absent from that window may still be in older messages: it is
# counted exactly, capped, from the per-owner index (cheap, as it is rare).
# Removed messages count too: a purged one has no words left, and a
# soft-deleted one barely moves an IDF. The history size is max(seq): the
# unique (owner, seq) index answers it without a scan.
_DF_SQL = f"""
WITH recent AS MATERIALIZED (
    SELECT search FROM chat_message WHERE owner_id = %(owner)s AND id <> %(exclude)s
    ORDER BY seq DESC LIMIT %(window)s
), sizes AS MATERIALIZED (
    SELECT (SELECT count(*) FROM recent) AS w, (SELECT avg(length(search)) FROM recent) AS avg_len,
           (SELECT coalesce(max(seq), 0) FROM chat_message WHERE owner_id = %(owner)s) AS n
), terms AS MATERIALIZED (
    SELECT l.i, l.oq, (SELECT count(*) FROM recent r WHERE r.search @@ l.q) AS wdf
    FROM unnest(%(queries)s::tsquery[], %(owner_queries)s::tsquery[]) WITH ORDINALITY AS l(q, oq, i)
)
SELECT t.wdf, s.w, s.n, s.avg_len,
       CASE WHEN t.wdf = 0 AND s.n > s.w + 1 THEN
           (SELECT count(*) FROM (
               SELECT FROM chat_message WHERE owner_id = %(owner)s AND {OWNER_SEARCH} @@ t.oq LIMIT %(cap)s
           ) c)
       END AS df
FROM terms t, sizes s
ORDER BY t.i
"""


def query_terms(*, owner_id: int, text: str, exclude_id: int = 0, budget: int | None = None) -> QueryTerms:
    """The rarest lexemes of `text` in the owner's history, within `budget` matches, with their BM25 IDF.

    `exclude_id` is the question's own message, if stored: it holds every
    one of its lexemes and does not count.
    """
    budget = MATCH_BUDGET if budget is None else budget
    if not text.strip():
        return QueryTerms(lexemes=[], idf=[])
    with connection.cursor() as cursor:
        cursor.execute(_LEXEMES_SQL, {"text": text})
        lexemes = [lexeme for lexeme in cursor.fetchone()[0] if lexeme.isalnum()][:MAX_LEXEMES]
        if not lexemes:
            return QueryTerms(lexemes=[], idf=[])
        params: dict[str, Any] = {
            "owner": owner_id,
            "exclude": exclude_id,
            "window": DF_WINDOW,
            "queries": [f"'{lexeme}'" for lexeme in lexemes],
            "owner_queries": [_owner_tsquery(owner_id, [lexeme]) for lexeme in lexemes],
            "cap": budget + 1,
        }
        cursor.execute(_DF_SQL, params)
        rows = cursor.fetchall()
    own = 1 if exclude_id else 0
    found = []
    avg_len = float(rows[0][3] or 1.0)
    for lexeme, (window_df, window, n, _, indexed_df) in zip(lexemes, rows, strict=True):
        n = max(n - own, window, 1)
        df = indexed_df - own if indexed_df is not None else window_df * n / max(window, 1)
        if df > 0:
            found.append((df, lexeme, math.log(1 + (n - df + 0.5) / (df + 0.5))))
    kept, total = [], 0.0
    for df, lexeme, weight in sorted(found)[:MATCH_LEXEMES]:
        total += df
        if total > budget:
            break
        kept.append((lexeme, weight))
    kept.sort()
    return QueryTerms(lexemes=[lexeme for lexeme, _ in kept], idf=[weight for _, weight in kept], avg_len=avg_len)


# The vector candidates: exactly the vector-only query's first step (see
# chat/selectors.py for why it orders by distance alone: the per-owner
# IVFFlat index). The lexical candidates: OR query through the GIN index,
# scored by summed IDF with BM25's saturation and length normalisation.
# The column has no dimension: __EMBEDDING__ becomes `embedding::vector(<the
# question's dimension>)`, the expression of the per-owner, per-model IVFFlat
# indexes (chat/vector_indexes.py), so the planner can use one; the model
# filter keeps every other model's vectors (other dimensions) out.
_VECTOR_CTE = """
vec AS MATERIALIZED (
    SELECT id, seq, __EMBEDDING__ <=> %(query)s::vector AS distance
    FROM chat_message
    WHERE owner_id = %(owner)s AND status = ANY(%(live)s) AND id <> %(exclude)s AND role <> %(system)s
      AND role <> %(tool)s AND tool_calls IS NULL
      AND embedding IS NOT NULL AND embedding_model = %(model)s AND %(query)s::vector IS NOT NULL
    ORDER BY __EMBEDDING__ <=> %(query)s::vector
    LIMIT %(candidates)s
), vrank AS MATERIALIZED (
    SELECT id, seq, 1 - distance AS vscore, row_number() OVER (ORDER BY distance, seq DESC) AS vr FROM vec
)"""

_LEXICAL_CTE = f"""
terms AS MATERIALIZED (
    SELECT lexeme::tsquery AS q, idf FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS t(lexeme, idf)
), lexmatch AS MATERIALIZED (
    SELECT m.id, m.owner_id, m.seq, length(m.search) AS len,
           (SELECT sum(t.idf) FROM terms t WHERE m.search @@ t.q) AS matched
    FROM chat_message m
    WHERE %(has_terms)s AND m.owner_id = %(owner)s AND m.status = ANY(%(live)s) AND m.id <> %(exclude)s
      AND m.role <> %(system)s AND m.role <> %(tool)s AND m.tool_calls IS NULL
      AND {OWNER_SEARCH} @@ %(tsquery)s::tsquery
), lexscored AS MATERIALIZED (
    -- The owner filter is applied again here, past the CTE's fence: the one
    -- in lexmatch is there to read the owner's partition only (the owner
    -- token already selects the rows in the GIN index).
    SELECT id, seq, matched / %(mass)s::float8 AS lshare,
           matched * %(bm25_top)s::float8 / (%(bm25_base)s::float8 + %(bm25_per_lexeme)s::float8 * len) AS bm25
    FROM lexmatch WHERE owner_id = %(owner)s
), lrank AS MATERIALIZED (
    SELECT id, seq, lshare, bm25, row_number() OVER (ORDER BY bm25 DESC, seq DESC) AS lr
    FROM lexscored ORDER BY bm25 DESC, seq DESC LIMIT %(candidates)s
)"""

_FUSED_SQL = f"""
WITH {_VECTOR_CTE}, {_LEXICAL_CTE}, fused AS MATERIALIZED (
    SELECT coalesce(v.id, l.id) AS id, coalesce(v.seq, l.seq) AS seq, v.vscore, l.lshare,
           coalesce(v.vscore >= %(threshold)s::float8, false) AS by_vector,
           coalesce(l.lshare >= %(lexical_floor)s::float8, false) AS by_lexical,
           v.vr, l.lr
    FROM vrank v FULL OUTER JOIN lrank l ON l.id = v.id
), scored AS MATERIALIZED (
    -- A signal's rank counts only if the candidate passes that signal's own
    -- floor, so a weak match on one side cannot lift a candidate.
    SELECT f.*, m.role, m.content,
           (CASE WHEN f.by_vector THEN 1.0 / (%(rrf_k)s::float8 + f.vr) ELSE 0 END
            + CASE WHEN f.by_lexical THEN 1.0 / (%(rrf_k)s::float8 + f.lr) ELSE 0 END)
           * CASE WHEN m.role = 'user' AND rtrim(m.content) LIKE '%%?' THEN %(question_weight)s::float8 ELSE 1 END
           AS rrf
    FROM fused f JOIN chat_message m ON m.owner_id = %(owner)s AND m.id = f.id
    WHERE f.by_vector OR f.by_lexical
)
SELECT id, seq, role, content, vscore, by_vector, by_lexical, rrf
FROM scored ORDER BY rrf DESC, seq DESC LIMIT %(k)s
"""

# Full text alone (the `lexical` policy): the same scoring, no vectors.
_LEXICAL_SQL = f"""
WITH {_LEXICAL_CTE}, topk AS MATERIALIZED (
    SELECT * FROM lrank WHERE lshare >= %(lexical_floor)s::float8 ORDER BY bm25 DESC, seq DESC LIMIT %(k)s
)
SELECT t.id, t.seq, m.role, m.content,
       CASE WHEN m.embedding IS NULL OR %(query)s::vector IS NULL OR m.embedding_model <> %(model)s THEN NULL
            ELSE 1 - (m.embedding <=> %(query)s::vector) END,
       false, true, t.bm25
FROM topk t JOIN chat_message m ON m.owner_id = %(owner)s AND m.id = t.id
ORDER BY t.bm25 DESC, t.seq DESC
"""


def hybrid_retrieve(
    *,
    owner_id: int,
    exclude_id: int,
    text: str,
    query: str | None,
    k: int,
    threshold: float,
    lexical_floor: float = LEXICAL_FLOOR,
    signals: str = "both",
    probes: int = 10,
    model: str = "",
    dim: int = 0,
) -> list[ContextItem]:
    """Top-k of the owner's live messages by fused (or lexical-only) relevance, most relevant first.

    `query` is the question's embedding as a vector literal (None: words
    only) of `dim` floats, compared with vectors of the same `model` only; `signals` is
    "both" (fused) or "lexical". Each item's `score` is its cosine
    similarity to the question (0 when either has no embedding)
    and `signal` says which floor it passed: vector, lexical or both.
    """
    terms = query_terms(owner_id=owner_id, text=text, exclude_id=exclude_id)
    if signals == "lexical" and not terms.lexemes:
        return []
    if not terms.lexemes:
        # Nothing to match by words; keep the fused query's shape with a
        # tsquery that matches nothing, so the vector side decides alone.
        terms = QueryTerms(lexemes=[], idf=[])
    params: dict[str, Any] = {
        "owner": owner_id,
        "live": LIVE,
        "system": SYSTEM,
        "tool": TOOL,
        "exclude": exclude_id,
        "query": query,
        "model": model,
        "candidates": max(k, CANDIDATES),
        "k": k,
        "threshold": threshold,
        "lexical_floor": lexical_floor,
        "lexemes": terms.lexemes,
        "idf": terms.idf,
        "mass": terms.mass or 1.0,
        # An empty tsquery matches nothing (PostgreSQL notices, does not fail).
        # No words to match: the lexical side is skipped (a constant false).
        "has_terms": bool(terms.lexemes),
        "tsquery": _owner_tsquery(owner_id, terms.lexemes) if terms.lexemes else "",
        # BM25 with tf = 1: idf * (k1 + 1) / (1 + k1 * (1 - b + b * len / avg_len)).
        "bm25_top": BM25_K1 + 1,
        "bm25_base": 1 + BM25_K1 * (1 - BM25_B),
        "bm25_per_lexeme": BM25_K1 * BM25_B / max(terms.avg_len, 1.0),
        "rrf_k": RRF_K,
        "question_weight": QUESTION_WEIGHT,
    }
    sql = _LEXICAL_SQL if signals == "lexical" else _FUSED_SQL
    sql = sql.replace("__EMBEDDING__", embedding_cast(dim) if query is not None and dim else "embedding")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL ivfflat.probes = {int(probes)}")
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    items = []
    for id_, seq, role, content, vscore, by_vector, by_lexical, _ in rows:
        signal = "both" if by_vector and by_lexical else "vector" if by_vector else "lexical"
        items.append(
            ContextItem(id=id_, seq=seq, role=role, content=content, score=float(vscore or 0.0), signal=signal)
        )
    return items


_NEIGHBOURS_SQL = f"""
WITH terms AS MATERIALIZED (
    SELECT lexeme::tsquery AS q, idf FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS t(lexeme, idf)
), matches AS MATERIALIZED (
    SELECT m.id, m.owner_id, (SELECT sum(t.idf) FROM terms t WHERE m.search @@ t.q) AS matched
    FROM chat_message m
    WHERE m.owner_id = %(owner)s AND m.status = ANY(%(live)s) AND NOT (m.id = ANY(%(exclude)s)) AND m.role <> %(system)s
      AND m.role <> %(tool)s AND m.tool_calls IS NULL
      AND {OWNER_SEARCH} @@ %(tsquery)s::tsquery
)
SELECT id FROM matches WHERE owner_id = %(owner)s AND matched / %(mass)s::float8 >= %(floor)s::float8
"""


def lexical_neighbours(*, owner_id: int, terms: QueryTerms, exclude: set[int], floor: float) -> set[int]:
    """The owner's live messages, less `exclude`, that would enter a context on these words alone."""
    if not terms.lexemes:
        return set()
    params: dict[str, Any] = {
        "owner": owner_id,
        "live": LIVE,
        "system": SYSTEM,
        "tool": TOOL,
        "exclude": sorted(exclude),
        "lexemes": terms.lexemes,
        "idf": terms.idf,
        "mass": terms.mass,
        "floor": floor,
        "tsquery": _owner_tsquery(owner_id, terms.lexemes),
    }
    with connection.cursor() as cursor:
        cursor.execute(_NEIGHBOURS_SQL, params)
        return {row[0] for row in cursor.fetchall()}
