"""Neighbours: the answer after a matched question (and, in mode both, the message before a match)."""

from typing import Any

from django.db import connection

from chat.llm import ContextItem
from chat.retrieval.candidates import LIVE, SYSTEM, TOOL

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
# cascade when that neighbour is deleted (lab/HISTORY.md measures |Dep|).
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
    # A fact (its own thread, in no conversation) has no neighbours.
    asking = [item.id for item in items if item.role != "fact" and (mode != "question" or is_question(item.content))]
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
        if mode == "fill" or item.id not in asking:
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
