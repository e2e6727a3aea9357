"""The time re-rank: what was said in the period a question names, and the latest statement on a subject."""

from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from chat.llm import ContextItem
from chat.models import SAID_AT_SQL
from chat.retrieval.candidates import ASKED, LIVE, SYSTEM, TOOL
from chat.retrieval.terms import OWNER_SEARCH, QueryTerms, owner_tsquery, query_terms
from chat.retrieval.time_cues import TimeCues, anchored, time_cues

# --- Time in the question (chat/retrieval/time_cues.py) -----------------------------------
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
        "tsquery": owner_tsquery(owner_id, terms.lexemes),
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
