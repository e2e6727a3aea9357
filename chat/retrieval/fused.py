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
question's IDF mass it matches) for the lexical one."""

from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from chat.index.vectors import embedding_cast, vector_query_cursor
from chat.llm import ContextItem
from chat.models import SAID_AT_SQL
from chat.retrieval.candidates import ASKED, ASKED_COLUMN, HELD_COLUMN, LIVE, REACH_CTE, SYSTEM, TOOL
from chat.retrieval.terms import BM25_B, BM25_K1, OWNER_SEARCH, QueryTerms, owner_tsquery, query_terms
from chat.retrieval.time_cues import time_cues
from chat.retrieval.time_rank import TIME_POOL, time_rerank, with_anchors

# Candidates each signal contributes before fusion.
CANDIDATES = 40
# RRF's constant. 60 is the original paper's (Cormack et al. 2009) for
# lists of 1,000 documents; over 40 candidates a side and a top-5, 10 did as
# well or better on both the CM benchmark and TOFU (lab/HISTORY.md, "Retrieval quality").
RRF_K = 10
# Share of the question's IDF mass a message must match to pass on words
# alone (lab/HISTORY.md, "Retrieval quality", has the measurement; DELLM_LEXICAL_FLOOR).
LEXICAL_FLOOR = 0.35

# A lexeme a message holds only in its context (its previous turn, speaker
# or date: weight 'B' of its search vector, chat/index/context.py) counts
# this share of its IDF: own words are preferred (docs/RETRIEVAL.md,
# "Conversational context": counted in full, context cost CM's fused recall@5
# 0.046; at 0.25 it costs nothing and lifts recall@1).
CONTEXT_WEIGHT = 0.25

# A past question states no fact (the responder never quotes one either), so
# it ranks below statements that match as well: its fused score is scaled.
# Its worth is its answer (which `NEIGHBOURS` brings along), so one with no
# live message after it in its thread (never answered, or the answer
# removed) is scaled by UNANSWERED_WEIGHT instead. docs/RETRIEVAL.md, "Past
# questions", has the sweep (0.25 and 0.1 measured the same; 0.5 for both
# lost DIA's questions to earlier questions naming the same person).
QUESTION_WEIGHT = 0.5
UNANSWERED_WEIGHT = 0.25


# The vector candidates: exactly the vector-only query's first step (see
# chat/selectors.py for why it orders by distance alone: the per-owner
# IVFFlat index). The lexical candidates: OR query through the GIN index,
# scored by summed IDF with BM25's saturation and length normalisation.
# The column has no dimension: __EMBEDDING__ becomes `embedding::vector(<the
# question's dimension>)`, the expression of the per-owner, per-model IVFFlat
# indexes (chat/index/vectors.py), so the planner can use one; the model
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

# The lexical signal's matches carry, per term (in `terms` order), `hits`: 2
# where the message's own words hold it, 1 where only its context does, else
# 0; each term is an expression of its own, spelt out for the question's
# number of terms (`_lexical_sql`), not a sub-select over `terms`: a
# sub-select run per matched row was most of the signal's cost (3 ms of 4 at
# 750 matches). `matched`, the IDF they hold (context at CONTEXT_WEIGHT), is
# summed from `hits` the same way.
_LEXICAL_CTE = f"""
terms AS MATERIALIZED (
    SELECT idf, i FROM unnest(%(idf)s::float8[]) WITH ORDINALITY AS t(idf, i)
), lexmatch AS MATERIALIZED (
    SELECT m.id, m.owner_id, m.seq, length(m.search) AS len, {ASKED_COLUMN}, __HITS__ AS hits
    FROM chat_message m
    WHERE %(has_terms)s AND m.owner_id = %(owner)s AND m.status = ANY(%(live)s) AND m.id <> %(exclude)s
      AND m.role <> %(system)s AND m.role <> %(tool)s AND m.tool_calls IS NULL
      AND {OWNER_SEARCH} @@ %(tsquery)s::tsquery
), {REACH_CTE.format(matches="lexmatch", holds="l.hits[t.i] > 0")}, lexsum AS (
    -- The owner filter is applied again here, past the CTE's fence: the one
    -- in lexmatch is there to read the owner's partition only (the owner
    -- token already selects the rows in the GIN index).
    SELECT id, seq, len, __MATCHED__ AS matched FROM lexmatch WHERE owner_id = %(owner)s
), lexscored AS MATERIALIZED (
    SELECT id, seq, matched / (SELECT mass FROM reach) AS lshare,
           matched * %(bm25_top)s::float8 / (%(bm25_base)s::float8 + %(bm25_per_lexeme)s::float8 * len) AS bm25
    FROM lexsum
), lrank AS MATERIALIZED (
    SELECT id, seq, lshare, bm25, row_number() OVER (ORDER BY bm25 DESC, seq DESC) AS lr
    FROM lexscored ORDER BY bm25 DESC, seq DESC LIMIT %(candidates)s
)"""


def _lexical_sql(sql: str, terms: int) -> str:
    """`sql` (over `_LEXICAL_CTE`) spelt out for this many terms; their parameters are `_term_params`'."""
    hits = ", ".join(
        f"CASE WHEN m.search @@ %(q{i})s::tsquery THEN CASE WHEN m.search @@ %(own{i})s::tsquery THEN 2 ELSE 1 END"
        " ELSE 0 END"
        for i in range(terms)
    )
    matched = " + ".join(
        f"CASE hits[{i + 1}] WHEN 2 THEN %(idf{i})s::float8 WHEN 1 THEN %(idf{i})s::float8 * %(context_weight)s::float8"
        " ELSE 0 END"
        for i in range(terms)
    )
    return sql.replace("__HITS__", f"ARRAY[{hits}]::int[]").replace("__MATCHED__", f"({matched or '0'})::float8")


def _term_params(terms: QueryTerms) -> dict[str, Any]:
    """Each term's lexeme (as a query of any weight, and of the own words' weight 'A') and IDF, for `_lexical_sql`."""
    params: dict[str, Any] = {}
    for i, (lexeme, idf) in enumerate(zip(terms.lexemes, terms.idf, strict=True)):
        params |= {f"q{i}": f"'{lexeme}'", f"own{i}": f"'{lexeme}':A", f"idf{i}": idf}
    return params


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
    SELECT f.*, m.role, m.content, {SAID_AT_SQL} AS said_at,
           (CASE WHEN f.by_vector THEN 1.0 / (%(rrf_k)s::float8 + f.vr) ELSE 0 END
            + CASE WHEN f.by_lexical THEN 1.0 / (%(rrf_k)s::float8 + f.lr) ELSE 0 END)
           * CASE WHEN NOT ({ASKED}) THEN 1
                  WHEN EXISTS (
                      SELECT FROM chat_message a
                      WHERE a.owner_id = %(owner)s AND a.thread_id = m.thread_id AND a.seq > m.seq
                        AND a.id <> %(exclude)s AND a.status = ANY(%(live)s)
                        AND a.role <> %(system)s AND a.role <> %(tool)s AND a.tool_calls IS NULL
                  ) THEN %(question_weight)s::float8
                  ELSE %(unanswered_weight)s::float8 END
           AS rrf
    FROM fused f JOIN chat_message m ON m.owner_id = %(owner)s AND m.id = f.id
    WHERE f.by_vector OR f.by_lexical
)
SELECT id, seq, role, content, vscore, by_vector, by_lexical, rrf, said_at
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
       false, true, t.bm25, {SAID_AT_SQL}
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
    asked_at: datetime | None = None,
) -> list[ContextItem]:
    """Top-k of the owner's live messages by fused (or lexical-only) relevance, most relevant first.

    `query` is the question's embedding as a vector literal (None: words
    only) of `dim` floats, compared with vectors of the same `model` only; `signals` is
    "both" (fused) or "lexical". Each item's `score` is its cosine
    similarity to the question (0 when either has no embedding)
    and `signal` says which floor it passed: vector, lexical or both.
    `asked_at` (default now) is when the question was said: "last May" is
    read against it (`time_rerank`).
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
        "context_weight": CONTEXT_WEIGHT,
        "idf": terms.idf,
        **_term_params(terms),
        "mass": terms.mass or 1.0,
        # An empty tsquery matches nothing (PostgreSQL notices, does not fail).
        # No words to match: the lexical side is skipped (a constant false).
        "has_terms": bool(terms.lexemes),
        "tsquery": owner_tsquery(owner_id, terms.lexemes) if terms.lexemes else "",
        # BM25 with tf = 1: idf * (k1 + 1) / (1 + k1 * (1 - b + b * len / avg_len)).
        "bm25_top": BM25_K1 + 1,
        "bm25_base": 1 + BM25_K1 * (1 - BM25_B),
        "bm25_per_lexeme": BM25_K1 * BM25_B / max(terms.avg_len, 1.0),
        "rrf_k": RRF_K,
        "question_weight": QUESTION_WEIGHT,
        "unanswered_weight": UNANSWERED_WEIGHT,
    }
    cues = with_anchors(time_cues(text, asked_at or timezone.now()), owner_id=owner_id, exclude_id=exclude_id)
    # A question that speaks of time re-ranks a wider pool (time_rerank).
    params["k"] = max(k, TIME_POOL) if cues.any else k
    sql = _lexical_sql(_LEXICAL_SQL if signals == "lexical" else _FUSED_SQL, len(terms.lexemes))
    sql = sql.replace("__EMBEDDING__", embedding_cast(dim) if query is not None and dim else "embedding")
    with vector_query_cursor(probes=probes) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    ranked = []
    for id_, seq, role, content, vscore, by_vector, by_lexical, relevance, said_at in rows:
        signal = "both" if by_vector and by_lexical else "vector" if by_vector else "lexical"
        item = ContextItem(
            id=id_, seq=seq, role=role, content=content, score=float(vscore or 0.0), signal=signal, said_at=said_at
        )
        ranked.append((item, float(relevance)))
    if cues.any:
        ranked = time_rerank(ranked, cues, text, terms, owner_id=owner_id)
    return [item for item, _ in ranked[:k]]


def lexical_matches(
    *, owner_id: int, terms: QueryTerms, exclude: set[int], floor: float, reach: float | None = None
) -> tuple[set[int], float | None]:
    """The owner's live messages, less `exclude`, that would enter a context on these words alone, and the floor's
    whole (`REACH_CTE`) they were measured against; `reach`: that whole instead of today's.

    The receipt's forget check compares the matches after a deletion with
    those before, against the whole measured before: a deletion can shrink
    the whole (a word held only by a removed message, or by an index built
    from one), and a message whose own words did not change must not pass
    for a new match because of it.
    """
    if not terms.lexemes:
        return set(), None
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
        "tsquery": owner_tsquery(owner_id, terms.lexemes),
        "reach": reach,
    }
    with connection.cursor() as cursor:
        cursor.execute(_LEXICAL_MATCHES_SQL, params)
        rows = cursor.fetchall()
    return {pk for pk, _ in rows if pk is not None}, rows[0][1]


_LEXICAL_MATCHES_SQL = f"""
WITH terms AS MATERIALIZED (
    SELECT lexeme::tsquery AS q, idf, i
    FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) WITH ORDINALITY AS t(lexeme, idf, i)
), matches AS MATERIALIZED (
    SELECT m.id, m.owner_id, {ASKED_COLUMN}, {HELD_COLUMN},
        (SELECT sum(t.idf) FROM terms t WHERE m.search @@ t.q) AS matched
    FROM chat_message m
    WHERE m.owner_id = %(owner)s AND m.status = ANY(%(live)s) AND NOT (m.id = ANY(%(exclude)s)) AND m.role <> %(system)s
      AND m.role <> %(tool)s AND m.tool_calls IS NULL
      AND {OWNER_SEARCH} @@ %(tsquery)s::tsquery
), {REACH_CTE.format(matches="matches", holds="t.i = ANY(l.held)")}
SELECT m.id, r.mass FROM reach r
LEFT JOIN matches m ON m.owner_id = %(owner)s AND m.matched / coalesce(%(reach)s::float8, r.mass) >= %(floor)s::float8
"""
