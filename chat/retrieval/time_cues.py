"""Time in questions and in memories, read without a model: "when ...", "last May", "in 2023", "two weeks ago".

A small hand-written grammar over words, in linear time: the text is split
into lower-case words by one regular expression that cannot backtrack (a
single character class), and each rule looks at most two words back and
two ahead, so the cost is a constant per word whatever the input. What it
reads:

- a **period**: a month ("May", "last May", "in May 2023", "on May 7"), a
  year ("in 2023"), a season ("last summer"; northern hemisphere), a
  relative span ("yesterday", "last week", "last month", "last year",
  "three days ago", "two weeks ago"). Each is resolved against a reference
  time: a question's against when it was asked, a memory's against when it
  was said, so "we went there last summer", said in September 2023, is
  about summer 2023;
- a **relation** to a period or an event: "before May" is every time
  before May; "before I moved" / "after the move" name an event by its
  words (the next ANCHOR_WORDS), which retrieval finds in the history
  (chat/retrieval/time_rank.py, `anchor_time`) and turns into a period;
- whether a question **asks when** ("When did...", "what date", "how long
  ago");
- whether a question **asks for the current** value ("Where do I live
  now?", "What's my current job?"): the latest statement should win;
- whether a text **states a time** at all (a memory that holds a period, or a
  weekday: "on Friday night", "last weekend"): the dated evidence a "when"
  question wants.

"May" is a month only where a month can stand ("last May", "in May", "May
7", "May 2023"), never the verb ("may I ask"). Periods are half-open
[start, end) in UTC.
"""

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

# A question is short; a pasted page is not, and only its start is read.
MAX_CHARS = 2000

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        1,
    )
    for name in names
}
# Words that are also months' names or abbreviations in plain English: a month only in a month's place.
AMBIGUOUS_MONTHS = {"may", "march", "mar", "jan", "jun", "dec", "sept", "oct", "nov", "aug", "apr", "feb", "jul", "sep"}
# The first month of each season (northern hemisphere), three months long; winter starts in December.
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "weekend"}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "few": 3, "several": 3,
}  # fmt: skip
UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365, "years": 365}
# Words before a month that make it one ("in May", "last May", "since May").
MONTH_LEADS = {
    "in", "on", "last", "this", "next", "since", "until", "till", "early", "late", "mid", "of", "during", "before",
    "after",
}  # fmt: skip
# Words that make a question ask for a time.
WHEN_WORDS = {"when"}
WHEN_PAIRS = {("what", "date"), ("what", "day"), ("what", "year"), ("what", "month"), ("how", "long")}
# Words of a plain statement of time without a resolvable period ("the other day", "recently").
TIME_WORDS = {"yesterday", "today", "tonight", "tomorrow", "ago", "recently", "weekend"} | WEEKDAYS
# The last word of a relative span ("yesterday", "last week", "two days ago", "last summer").
RELATIVE_HEADS = {"yesterday", "ago", "week", "month", "year"} | set(SEASONS)
# Words that ask for the value as it is now, when it may have changed.
CURRENT_WORDS = {"now", "current", "currently", "nowadays", "latest", "anymore"}
YEAR_MIN, YEAR_MAX = 1900, 2100
# "before I moved", "after the move", "since the wedding": the event is the next few words.
RELATIONS = {"before": "before", "after": "after", "since": "after"}
ANCHOR_WORDS = 3
REF_EARLIEST = datetime(YEAR_MIN + 1, 1, 1, tzinfo=UTC)
REF_LATEST = datetime(YEAR_MAX - 1, 12, 31, tzinfo=UTC)
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)


@dataclass(frozen=True)
class Period:
    start: datetime
    end: datetime

    def holds(self, when: datetime) -> bool:
        return self.start <= when < self.end

    def overlaps(self, other: "Period") -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Anchor:
    """An event a question is placed by: "before I moved" is ("before", "i moved")."""

    relation: str
    words: str


@dataclass(frozen=True)
class TimeCues:
    """What a text says about time: the periods it names, whether it asks when or for the current value, and
    whether it states a time."""

    periods: tuple[Period, ...] = ()
    asks_when: bool = False
    asks_current: bool = False
    states_time: bool = False
    anchors: tuple[Anchor, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.periods) or self.asks_when or self.asks_current or bool(self.anchors)


# One character class repeated, nothing nested or alternative: a match can
# never backtrack into itself, so finding every word is linear in the text.
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Lower-case runs of letters and digits of the first MAX_CHARS characters (linear in the text)."""
    return _WORD.findall(text[:MAX_CHARS].lower())


def _day(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _months(year: int, month: int, count: int = 1) -> Period:
    end_month = month - 1 + count
    return Period(_day(date(year, month, 1)), _day(date(year + end_month // 12, end_month % 12 + 1, 1)))


def _digits(token: str) -> bool:
    # ASCII only: "²" is a digit to `isdigit` but not to `int`.
    return token.isascii() and token.isdigit()


def _year(token: str) -> int | None:
    if len(token) == 4 and _digits(token) and YEAR_MIN <= int(token) <= YEAR_MAX:
        return int(token)
    return None


def _day_of_month(token: str) -> int | None:
    digits = token[:-2] if token[-2:] in ("st", "nd", "rd", "th") else token
    if 1 <= len(digits) <= 2 and _digits(digits) and 1 <= int(digits) <= 31:
        return int(digits)
    return None


def _last_month_named(month: int, ref: datetime, *, strictly_before: bool) -> int:
    """The year of the latest `month` at or before `ref` (strictly before `ref`'s own month if asked)."""
    if month < ref.month or (month == ref.month and not strictly_before):
        return ref.year
    return ref.year - 1


def _month_period(tokens: list[str], i: int, month: int, ref: datetime) -> Period:
    before = tokens[i - 1] if i > 0 else ""
    after = tokens[i + 1] if i + 1 < len(tokens) else ""
    after2 = tokens[i + 2] if i + 2 < len(tokens) else ""
    year = _year(after) or (_year(after2) if _day_of_month(after) else None)
    if year is None and before == "next":
        year = ref.year if month > ref.month else ref.year + 1
    elif year is None:
        year = _last_month_named(month, ref, strictly_before=before == "last")
    day = _day_of_month(after)
    if day is not None:
        try:
            start = _day(date(year, month, day))
        except ValueError:
            return _months(year, month)
        return Period(start, start + timedelta(days=1))
    return _months(year, month)


def _is_month(tokens: list[str], i: int) -> bool:
    token = tokens[i]
    if token not in MONTHS:
        return False
    if token not in AMBIGUOUS_MONTHS:
        return True
    before = tokens[i - 1] if i > 0 else ""
    after = tokens[i + 1] if i + 1 < len(tokens) else ""
    return before in MONTH_LEADS or _day_of_month(after) is not None or _year(after) is not None


def _after_month(tokens: list[str], i: int) -> bool:
    if i >= 1 and _is_month(tokens, i - 1):
        return True
    return i >= 2 and _day_of_month(tokens[i - 1]) is not None and _is_month(tokens, i - 2)


def _relative(tokens: list[str], i: int, ref: datetime) -> Period | None:
    """A span named from `ref`: "yesterday", "last week/month/year/<season>", "<n> <unit>s ago"."""
    token = tokens[i]
    before = tokens[i - 1] if i > 0 else ""
    today = _day(ref.astimezone(UTC).date())
    if token == "yesterday":
        return Period(today - timedelta(days=1), today)
    if token == "ago" and i >= 2 and before in UNITS:
        count = tokens[i - 2]
        n = int(count) if _digits(count) and len(count) <= 3 else NUMBERS.get(count)
        if n is None:
            return None
        span = UNITS[before]
        centre = today - timedelta(days=n * span)
        # "Two weeks ago" is about then, give or take half a unit.
        slack = timedelta(days=max(1, span // 2))
        return Period(centre - slack, centre + slack + timedelta(days=1))
    if before != "last":
        return None
    if token == "week":
        monday = today - timedelta(days=today.weekday())
        return Period(monday - timedelta(days=7), monday)
    if token == "month":
        year, month = (ref.year, ref.month - 1) if ref.month > 1 else (ref.year - 1, 12)
        return _months(year, month)
    if token == "year":
        return Period(_day(date(ref.year - 1, 1, 1)), _day(date(ref.year, 1, 1)))
    if token in SEASONS:
        first = SEASONS[token]
        # The latest whole season that ended before `ref`'s month.
        year = ref.year if first + 3 <= ref.month else ref.year - 1
        if first == 12:
            year = ref.year - 1 if ref.month >= 3 else ref.year - 2
        return _months(year, first, 3)
    return None


def time_cues(text: str, ref: datetime) -> TimeCues:
    """The periods `text` names, resolved against `ref` (when it was said), and whether it asks or states a time."""
    # A time outside the years read (an imported "0001-01-01") is read as the
    # nearest edge, so no period can fall off the calendar.
    ref = min(max(ref, REF_EARLIEST), REF_LATEST)
    tokens = words(text)
    periods: list[Period] = []
    asks_when = False
    asks_current = False
    states_time = False
    anchors: list[Anchor] = []
    # "before"/"after" and where it stands: a period within the next two words is bounded by it ("before May").
    relation, at = "", -1
    for i, token in enumerate(tokens):
        asks_current = asks_current or token in CURRENT_WORDS
        before = tokens[i - 1] if i > 0 else ""
        found = len(periods)
        if token in WHEN_WORDS or (before, token) in WHEN_PAIRS:
            asks_when = True
        if _is_month(tokens, i):
            periods.append(_month_period(tokens, i, MONTHS[token], ref))
        elif _digits(token) and (year := _year(token)) is not None and not _after_month(tokens, i):
            # A year alone ("in 2023"); "May 2023" and "May 7 2023" were read with their month.
            periods.append(Period(_day(date(year, 1, 1)), _day(date(year + 1, 1, 1))))
        elif token in SEASONS and before in ("this", "in", "the", "next"):
            states_time = True
        elif token in RELATIVE_HEADS and (period := _relative(tokens, i, ref)) is not None:
            periods.append(period)
        if token in TIME_WORDS:
            states_time = True
        if relation and len(periods) > found:
            periods[-1] = _bounded(relation, periods[-1])
            relation = ""
        elif relation and i - at == 2:
            # No period: an event ("before I moved", "after the move"), found in the history by its words.
            anchors.append(Anchor(relation, " ".join(tokens[at + 1 : at + 1 + ANCHOR_WORDS])))
            relation = ""
        if token in RELATIONS:
            relation, at = RELATIONS[token], i
    if relation and at < len(tokens) - 1:
        anchors.append(Anchor(relation, " ".join(tokens[at + 1 : at + 1 + ANCHOR_WORDS])))
    return TimeCues(
        periods=tuple(periods),
        asks_when=asks_when,
        asks_current=asks_current,
        states_time=states_time or bool(periods),
        anchors=tuple(anchors),
    )


def _bounded(relation: str, period: Period) -> Period:
    return Period(EARLIEST, period.start) if relation == "before" else Period(period.end, LATEST)


def anchored(anchor: Anchor, when: datetime) -> Period:
    """The span before or after an event said at `when` (the event itself in neither)."""
    if anchor.relation == "before":
        return Period(EARLIEST, when)
    # Capped first: an imported time may be the calendar's last microsecond.
    return Period(min(when, LATEST) + timedelta(microseconds=1), LATEST)
