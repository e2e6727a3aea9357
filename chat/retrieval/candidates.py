"""What the retrieval's signals share: which messages are candidates, and SQL fragments of their matches."""

from chat.models import Message

LIVE = [str(s) for s in Message.LIVE]
# A system prompt is an input of the replies it shaped, never a memory: no query here returns one.
SYSTEM = str(Message.Role.SYSTEM)
# Nor is a tool step (a reply's tool calls, a client's tool result): it is provenance, not memory (docs/OPENAI.md).
TOOL = str(Message.Role.TOOL)
# The lexical side reads at most about this many messages: the question's
# lexemes are taken rarest first while their document frequencies add up to
# no more than this; the rest are this owner's stop words (low IDF, and
# scanning their postings is what would make a 100k-message history slow:
# about 20 us a matched row on a loaded 2-core machine). Counts stop there too.
MATCH_BUDGET = 1000

# A past question, as SQL over `m` (the test `is_question` states in Python).
ASKED = "m.role = 'user' AND rtrim(m.content) LIKE '%%?'"

# The lexical floor's whole: the IDF weight of the question's lexemes that a
# statement among the `matches` holds (all of them when none does). A word
# that only past questions hold cannot be evidence (a question states no
# fact: QUESTION_WEIGHT): "What is the name of Kira's dog?" shares only "dog"
# with "My dog Biscuit chewed ...", because "name" and "Kira" are in earlier
# questions alone, and that was 0.34 of the whole weight, under the floor.
# Each match carries which terms it holds (`held`, or `hits`) and whether it is a past question (`asked`).
REACH_CTE = """reach AS MATERIALIZED (
    SELECT coalesce(nullif(sum(t.idf), 0), %(mass)s::float8) AS mass FROM terms t
    WHERE EXISTS (SELECT FROM {matches} l WHERE NOT l.asked AND {holds})
)"""
ASKED_COLUMN = f"{ASKED} AS asked"
HELD_COLUMN = "ARRAY(SELECT t.i FROM terms t WHERE m.search @@ t.q) AS held"
