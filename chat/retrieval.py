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
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from chat.llm import ContextItem
from chat.models import SAID_AT_SQL, Message
from chat.temporal import TimeCues, anchored, time_cues
from chat.vector_indexes import embedding_cast, vector_query_cursor

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

# A past question, as SQL over `m` (the test `is_question` states in Python).
ASKED = "m.role = 'user' AND rtrim(m.content) LIKE '%%?'"

# A lexeme a message holds only in its context (its previous turn, speaker
# or date: weight 'B' of its search vector, chat/index_context.py) counts
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
# unique (owner, seq) index answers it without a scan. The window is read
# once for all lexemes, one count each (spelt out for the question's number
# of lexemes, `_df_sql`): a sub-select per lexeme re-read it each time.
_DF_SQL = f"""
WITH recent AS (
    SELECT search FROM chat_message WHERE owner_id = %(owner)s AND id <> %(exclude)s
    ORDER BY seq DESC LIMIT %(window)s
), win AS (
    SELECT count(*) AS w, avg(length(search)) AS avg_len, ARRAY[__COUNTS__]::bigint[] AS wdf FROM recent
), size AS (
    SELECT coalesce(max(seq), 0) AS n FROM chat_message WHERE owner_id = %(owner)s
)
SELECT w.wdf[l.i], w.w, s.n, w.avg_len,
       CASE WHEN w.wdf[l.i] = 0 AND s.n > w.w + 1 THEN
           (SELECT count(*) FROM (
               SELECT FROM chat_message WHERE owner_id = %(owner)s AND {OWNER_SEARCH} @@ l.oq LIMIT %(cap)s
           ) c)
       END AS df
FROM unnest(%(owner_queries)s::tsquery[]) WITH ORDINALITY AS l(oq, i), win w, size s
ORDER BY l.i
"""


def _df_sql(lexemes: int) -> str:
    """`_DF_SQL` spelt out for this many lexemes, each a parameter `q<i>`."""
    counts = ", ".join(f"count(*) FILTER (WHERE search @@ %(q{i})s::tsquery)" for i in range(lexemes))
    return _DF_SQL.replace("__COUNTS__", counts)


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
            **{f"q{i}": f"'{lexeme}'" for i, lexeme in enumerate(lexemes)},
            "owner_queries": [_owner_tsquery(owner_id, [lexeme]) for lexeme in lexemes],
            "cap": budget + 1,
        }
        cursor.execute(_df_sql(len(lexemes)), params)
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

# The lexical floor's whole: the IDF weight of the question's lexemes that a
# statement among the `matches` holds (all of them when none does). A word
# that only past questions hold cannot be evidence (a question states no
# fact: QUESTION_WEIGHT): "What is the name of Kira's dog?" shares only "dog"
# with "My dog Biscuit chewed ...", because "name" and "Kira" are in earlier
# questions alone, and that was 0.34 of the whole weight, under the floor.
# Each match carries which terms it holds (`held`, or `hits`) and whether it is a past question (`asked`).
_REACH = """reach AS MATERIALIZED (
    SELECT coalesce(nullif(sum(t.idf), 0), %(mass)s::float8) AS mass FROM terms t
    WHERE EXISTS (SELECT FROM {matches} l WHERE NOT l.asked AND {holds})
)"""
_ASKED = f"{ASKED} AS asked"
_HELD = "ARRAY(SELECT t.i FROM terms t WHERE m.search @@ t.q) AS held"

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
    SELECT m.id, m.owner_id, m.seq, length(m.search) AS len, {_ASKED}, __HITS__ AS hits
    FROM chat_message m
    WHERE %(has_terms)s AND m.owner_id = %(owner)s AND m.status = ANY(%(live)s) AND m.id <> %(exclude)s
      AND m.role <> %(system)s AND m.role <> %(tool)s AND m.tool_calls IS NULL
      AND {OWNER_SEARCH} @@ %(tsquery)s::tsquery
), {_REACH.format(matches="lexmatch", holds="l.hits[t.i] > 0")}, lexsum AS (
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
        "tsquery": _owner_tsquery(owner_id, terms.lexemes) if terms.lexemes else "",
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


# --- Time in the question (chat/temporal.py) -----------------------------------
# A question that names a period (or places itself before or after one, or
# an event), asks "when" or asks for the current value re-ranks the top
# TIME_POOL fused candidates (each passed a signal's floor: nothing unrelated
# gets in): a memory said in the period, or stating it, has its relevance
# scaled by 1 + PERIOD_BOOST; for a "when" question a memory that states a
# time (a date, "last weekend", "two days ago") by 1 + WHEN_BOOST; for a
# "now" question the latest statement by 1 + RECENCY_BOOST. Relevance is the
# fused RRF score (BM25 for the `lexical` policy); ties keep the newer first.
# docs/RETRIEVAL.md, "Time", has the sweep behind each constant.
TIME_POOL = 20
PERIOD_BOOST = 2.0
WHEN_BOOST = 0.5
RECENCY_BOOST = 1.0


# The event of "before I moved": the owner's live statement (never a past
# question) that best matches the anchor's words, the earliest of equals (the
# event is when it was first told). Bounded like the lexical signal: the
# anchor's rarest lexemes within MATCH_BUDGET matching rows.
_ANCHOR_SQL = f"""
WITH terms AS MATERIALIZED (
    SELECT lexeme::tsquery AS q, idf FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) AS t(lexeme, idf)
), matches AS MATERIALIZED (
    SELECT m.id, m.owner_id, m.seq, {SAID_AT_SQL} AS said_at,
           (SELECT sum(t.idf) FROM terms t WHERE m.search @@ t.q) AS matched
    FROM chat_message m
    WHERE m.owner_id = %(owner)s AND m.status = ANY(%(live)s) AND m.id <> %(exclude)s AND m.role <> %(system)s
      AND m.role <> %(tool)s AND m.tool_calls IS NULL AND NOT ({ASKED})
      AND {OWNER_SEARCH} @@ %(tsquery)s::tsquery
)
SELECT said_at FROM matches ORDER BY matched DESC, said_at, seq LIMIT 1
"""


def anchor_time(*, owner_id: int, text: str, exclude_id: int) -> datetime | None:
    """When the owner said the event an anchor names ("i moved"), or None when nothing matches its words."""
    terms = query_terms(owner_id=owner_id, text=text, exclude_id=exclude_id)
    if not terms.lexemes:
        return None
    params: dict[str, Any] = {
        "owner": owner_id,
        "live": LIVE,
        "system": SYSTEM,
        "tool": TOOL,
        "exclude": exclude_id,
        "lexemes": terms.lexemes,
        "idf": terms.idf,
        "tsquery": _owner_tsquery(owner_id, terms.lexemes),
    }
    with connection.cursor() as cursor:
        cursor.execute(_ANCHOR_SQL, params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def with_anchors(cues: TimeCues, *, owner_id: int, exclude_id: int) -> TimeCues:
    """`cues` with each anchor that names an event of the history turned into the period before or after it."""
    periods = list(cues.periods)
    for anchor in cues.anchors:
        when = anchor_time(owner_id=owner_id, text=anchor.words, exclude_id=exclude_id)
        if when is not None:
            periods.append(anchored(anchor, when))
    return replace(cues, periods=tuple(periods))


def time_boost(item: ContextItem, cues: TimeCues) -> float:
    """The factor a memory's relevance is scaled by for a question with these cues (1: none)."""
    if not cues.periods and not cues.asks_when:
        return 1.0
    stated = time_cues(item.content, item.said_at or timezone.now())
    factor = 1.0
    if cues.periods:
        said = item.said_at is not None and any(period.holds(item.said_at) for period in cues.periods)
        if said or any(p.overlaps(q) for p in stated.periods for q in cues.periods):
            factor *= 1 + PERIOD_BOOST
    if cues.asks_when and stated.states_time:
        factor *= 1 + WHEN_BOOST
    return factor


def _said_order(item: ContextItem) -> tuple[float, int]:
    return (item.said_at.timestamp() if item.said_at is not None else 0.0, item.seq)


# Which of the question's lexemes each candidate's own text holds (its
# content, not the `search` column, which may index more than the message).
# A past question states nothing (QUESTION_WEIGHT), so it is never the latest statement.
_SHARED_SQL = f"""
WITH asked AS MATERIALIZED (SELECT unnest(tsvector_to_array(to_tsvector('english', %(question)s))) AS lexeme)
SELECT m.id, ARRAY(
    SELECT unnest(tsvector_to_array(to_tsvector('english', m.content))) INTERSECT SELECT lexeme FROM asked
)
FROM chat_message m WHERE m.owner_id = %(owner)s AND m.id = ANY(%(ids)s) AND NOT ({ASKED})
"""


def latest_statements(items: list[ContextItem], question: str, terms: QueryTerms, *, owner_id: int) -> set[int]:
    """Ids of the candidates that restate, later, a thing an older candidate said: latest statement wins.

    Two candidates state the same thing when each text holds every lexeme
    of the question that the lexical signal matched (`terms`: english
    config, stop words never count; "job" in "my new job" and "a new job");
    of the candidates that do, the newest (by `said_at`, then seq) is kept.
    Every lexeme, not any: "Where does Tomás live now?" must not prefer this
    week's "living room" to the only statement about Tomás.
    """
    if not terms.lexemes:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(_SHARED_SQL, {"owner": owner_id, "question": question, "ids": [item.id for item in items]})
        shared = {id_: set(lexemes) for id_, lexemes in cursor.fetchall()}
    same = [item for item in items if shared.get(item.id, set()) >= set(terms.lexemes)]
    return {max(same, key=_said_order).id} if len(same) > 1 else set()


def time_rerank(
    ranked: list[tuple[ContextItem, float]], cues: TimeCues, question: str, terms: QueryTerms, *, owner_id: int
) -> list[tuple[ContextItem, float]]:
    """`ranked` (item, relevance) re-ordered by relevance scaled by `time_boost`, newer first on ties.

    A question that asks for the current value ("now", "current") also
    scales by 1 + RECENCY_BOOST each `latest_statements` candidate: the
    latest statement of a changed fact wins over the older one it matches as
    well.
    """
    boosted = [(item, relevance * time_boost(item, cues)) for item, relevance in ranked]
    if cues.asks_current:
        latest = latest_statements([item for item, _ in boosted], question, terms, owner_id=owner_id)
        boosted = [(item, score * (1 + RECENCY_BOOST) if item.id in latest else score) for item, score in boosted]
    return sorted(boosted, key=lambda pair: (-pair[1], -pair[0].seq))


_NEIGHBOURS_SQL = f"""
WITH terms AS MATERIALIZED (
    SELECT lexeme::tsquery AS q, idf, i
    FROM unnest(%(lexemes)s::text[], %(idf)s::float8[]) WITH ORDINALITY AS t(lexeme, idf, i)
), matches AS MATERIALIZED (
    SELECT m.id, m.owner_id, {_ASKED}, {_HELD}, (SELECT sum(t.idf) FROM terms t WHERE m.search @@ t.q) AS matched
    FROM chat_message m
    WHERE m.owner_id = %(owner)s AND m.status = ANY(%(live)s) AND NOT (m.id = ANY(%(exclude)s)) AND m.role <> %(system)s
      AND m.role <> %(tool)s AND m.tool_calls IS NULL
      AND {OWNER_SEARCH} @@ %(tsquery)s::tsquery
), {_REACH.format(matches="matches", holds="t.i = ANY(l.held)")}
SELECT m.id, r.mass FROM reach r
LEFT JOIN matches m ON m.owner_id = %(owner)s AND m.matched / coalesce(%(reach)s::float8, r.mass) >= %(floor)s::float8
"""


def lexical_matches(
    *, owner_id: int, terms: QueryTerms, exclude: set[int], floor: float, reach: float | None = None
) -> tuple[set[int], float | None]:
    """The owner's live messages, less `exclude`, that would enter a context on these words alone, and the floor's
    whole (`_REACH`) they were measured against; `reach`: that whole instead of today's.

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
        "tsquery": _owner_tsquery(owner_id, terms.lexemes),
        "reach": reach,
    }
    with connection.cursor() as cursor:
        cursor.execute(_NEIGHBOURS_SQL, params)
        rows = cursor.fetchall()
    return {pk for pk, _ in rows if pk is not None}, rows[0][1]


# Neighbours within the budget (docs/RETRIEVAL.md, "Neighbours within the budget"). In chat the
# answer is often the turn next to the one that matches: "Did you go to the
# concert in Lisbon?" matches a question about the concert, and the reply
# after it ("Yeah, it was amazing!") is the evidence, with no word of its own
# to match. A neighbour is the adjacent message in the match's thread, by
# shown position (a rewrite stands where the message it replaced stood),
# skipping system prompts and tool steps; it enters only if it is live
# (a deleted reply is never replaced by the message after it). Modes:
#   none: matches only;
#   question: a match that is a question ("...?") is followed by the message
#         after it, its answer; other matches stand alone;
#   next: each match, in rank order, is followed by the message after it;
#   both: ... by the message after it, then the one before it;
#   fill: matches first, then their next neighbours in the slots the
#         matches' floors left empty.
# The budget is shared greedily, in rank order, so the context is never
# longer than k, and the first j items of a k-context are the j-context.
# Every item is an edge of the reply: a neighbour in a slot a match would
# have taken adds no edge (it replaces one); one in a slot that would have
# stayed empty (`fill`, or fewer matches than k) adds one, and a bigger
# cascade when that neighbour is deleted (lab/README.md measures |Dep|).
NEIGHBOUR_MODES = ("none", "question", "next", "both", "fill")
NEIGHBOURS = "question"

# Each side is two index scans that stop at their first row: the nearest
# message shown at its own seq (message_thread_seq) and the nearest rewrite
# shown at its `place` (message_thread_place, partial: rewrites are few);
# the nearer of the two is the neighbour (at the same position, the newer:
# the rewrite, not the message it replaced). Sorting the thread by shown
# position instead cost 160-200 ms on a 20,000-message thread. The sides
# filter by thread (a thread is one owner's) and name the owner, so that the
# planner reads the owner's partition alone.
_NEIGHBOUR_SIDE = """
    (SELECT x.id, x.owner_id, x.seq, x.role, x.content, x.status, x.seq AS pos FROM chat_message x
     WHERE x.owner_id = %(owner)s AND x.thread_id = m.thread_id AND x.place IS NULL AND x.seq __CMP__ m.pos
       AND x.role <> %(system)s AND x.role <> %(tool)s AND x.tool_calls IS NULL
     ORDER BY x.seq __DIR__ LIMIT 1)
    UNION ALL
    (SELECT x.id, x.owner_id, x.seq, x.role, x.content, x.status, x.place AS pos FROM chat_message x
     WHERE x.owner_id = %(owner)s AND x.thread_id = m.thread_id AND x.place IS NOT NULL AND x.place __CMP__ m.pos
       AND x.role <> %(system)s AND x.role <> %(tool)s AND x.tool_calls IS NULL
     ORDER BY x.place __DIR__, x.seq DESC LIMIT 1)
"""
_MATCHED = """matched AS MATERIALIZED (
    SELECT id, thread_id, coalesce(place, seq) AS pos
    FROM chat_message WHERE id = ANY(%(ids)s::bigint[]) AND owner_id = %(owner)s
)"""
_NEXT_OF = f"""
SELECT m.id, 1, n.id, n.seq, n.role, n.content, n.status = ANY(%(live)s)
FROM matched m CROSS JOIN LATERAL (
    SELECT * FROM ({_NEIGHBOUR_SIDE.replace("__CMP__", ">").replace("__DIR__", "ASC")}) s
    ORDER BY pos, seq DESC LIMIT 1
) n
WHERE n.owner_id = %(owner)s"""
_PREVIOUS_OF = f"""
SELECT m.id, -1, n.id, n.seq, n.role, n.content, n.status = ANY(%(live)s)
FROM matched m CROSS JOIN LATERAL (
    SELECT * FROM ({_NEIGHBOUR_SIDE.replace("__CMP__", "<").replace("__DIR__", "DESC")}) s
    ORDER BY pos DESC, seq DESC LIMIT 1
) n
WHERE n.owner_id = %(owner)s"""
# The message after each match; and the one before it too (mode `both`).
_NEXT_OF_SQL = f"WITH {_MATCHED}{_NEXT_OF}"
_NEIGHBOURS_OF_SQL = f"WITH {_MATCHED}{_NEXT_OF}\nUNION ALL{_PREVIOUS_OF}"


def is_question(text: str) -> bool:
    """A turn that asks: its value as a memory is in the reply to it.

    The test of `QUESTION_WEIGHT`'s SQL, for either role: in a two-person
    chat imported as user and assistant, either side asks.
    """
    return text.rstrip().endswith("?")


def neighbours_add(*, owner_id: int, items: list[ContextItem], k: int, exclude_id: int, mode: str) -> list[ContextItem]:
    """`items` (matches, most relevant first) with their live neighbours, at most `k` in all (see NEIGHBOURS).

    A neighbour comes by position, not by a signal of its own: its `signal`
    is "" (as for `window`), its `score` 0. Never `exclude_id` (the question),
    never another owner's, a removed, a system or a tool message.
    """
    items = items[:k]
    if mode == "none" or not items:
        return items
    if mode not in NEIGHBOUR_MODES:
        raise ValueError(f"Unknown neighbours mode {mode!r}; use one of {', '.join(NEIGHBOUR_MODES)}.")
    # Only the matches whose neighbours may be taken are looked up: in mode
    # `question`, the questions (often none, and then nothing is read).
    asking = [item.id for item in items if mode != "question" or is_question(item.content)]
    if not asking:
        return items
    params: dict[str, Any] = {"ids": asking, "owner": owner_id, "live": LIVE, "system": SYSTEM, "tool": TOOL}
    with connection.cursor() as cursor:
        cursor.execute(_NEIGHBOURS_OF_SQL if mode == "both" else _NEXT_OF_SQL, params)
        rows = cursor.fetchall()
    found: dict[tuple[int, int], ContextItem] = {
        (match, direction): ContextItem(id=id_, seq=seq, role=role, content=content, score=0.0)
        for match, direction, id_, seq, role, content, live in rows
        if live and id_ != exclude_id
    }
    directions = (-1,) if mode == "both" else ()
    chosen: dict[int, ContextItem] = {}
    for item in items:
        if len(chosen) >= k:
            break
        # A match taken earlier as a neighbour keeps its place, and its signal.
        chosen[item.id] = item
        if mode == "fill" or (mode == "question" and not is_question(item.content)):
            continue
        for direction in (1, *directions):
            neighbour = found.get((item.id, direction))
            if neighbour is not None and len(chosen) < k:
                chosen.setdefault(neighbour.id, neighbour)
    if mode == "fill":
        for item in items:
            neighbour = found.get((item.id, 1))
            if neighbour is not None and len(chosen) < k:
                chosen.setdefault(neighbour.id, neighbour)
    return list(chosen.values())
