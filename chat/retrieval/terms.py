"""The lexical signal's terms: a question's lexemes and their BM25 document frequencies in the owner's recent window."""

import math
from dataclasses import dataclass
from typing import Any

from django.db import connection

from chat.retrieval.candidates import MATCH_BUDGET

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


def owner_tsquery(owner_id: int, lexemes: list[str]) -> str:
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
            "owner_queries": [owner_tsquery(owner_id, [lexeme]) for lexeme in lexemes],
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
