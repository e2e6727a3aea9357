"""The offline reading of what a user says: their statements about themselves, by sentence, with their subject
(the offline fact extractor, paper VII-A), whether a text is a question or a request, and which subjects a
question asks about (the offline responder's, `chat.llm`).

A message is split into sentences and a sentence into clauses where it goes
on about the user with another verb ("I live in Lisbon and work as a
nurse"); a clause is kept when it is a statement in the first person that a
pattern of `PATTERNS` places under one subject, and is not a question, a
request or a thought about the conversation ("I think you ...", anything
addressed to "you"). What is kept is the user's own words, tidied (the
discourse marker before it dropped, capitalised, one full stop), under its
subject's label: deterministic, so the same words always give the same fact
and a fact re-derived from the same sources is the same text.

Every expression here is literal alternatives and single `\\s+` runs, with
no nested quantifier: matching is linear in the sentence, and a sentence is
at most MAX_SENTENCE_CHARS.
"""

import re
from dataclasses import dataclass

from chat.subjects import SUBJECT_KEYS, SUBJECTS, fact_parts, fact_text

# A longer sentence is not a statement worth a fact (a pasted text, a list).
MAX_SENTENCE_CHARS = 300
MIN_WORDS = 2
MAX_FACTS_PER_MESSAGE = 8

_I_AM = r"i(?:'m|\s+am)"
_VERBS = (
    r"live|lived|work|worked|have|had|love|like|enjoy|study|studied|moved|got|started|play|own|adopted|"
    r"grew|was|am|'m|hate|prefer|speak|teach|run|volunteer|coach"
)
# Animals people keep (a pet's fact names one of them).
_PETS = (
    "dog|cat|parrot|rabbit|hamster|horse|turtle|tortoise|bird|ferret|goldfish|fish|guinea\\s+pig|snake|lizard|"
    "gecko|budgie|canary|pony|iguana|chinchilla|rat|mouse|chicken"
)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
# Where a statement goes on with another of the user's verbs: the clause after it is about the user too.
_CLAUSES = re.compile(rf",?\s+(?:and|but|and\s+i|but\s+i)\s+(?=(?:{_VERBS})\b)", re.IGNORECASE)
_MARKERS = re.compile(
    r"^(?:so|well|actually|yeah|yes|oh|also|btw|by\s+the\s+way|anyway|ok|okay|hi|hey|hello|and|but|fun\s+fact|"
    r"just\s+so\s+you\s+know|for\s+context|fyi|honestly|frankly|sorry|big\s+news|guess\s+what|quick\s+update|"
    r"update)\b[\s,:!.-]*",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"^(?:i\b|i'm\b|i've\b|my\b)", re.IGNORECASE)
# A statement about the user names them somewhere ("Had to skip dessert because I'm allergic to nuts").
_ABOUT_USER = re.compile(r"\b(?:i|i'm|i've|i'd|my|me|we|we're|we've|our)\b", re.IGNORECASE)
# A request or a question, however it ends ("Suggest a walk for me and my dog", "Tell me about my cat").
_REQUEST = re.compile(
    r"^(?:please\s+)?(?:suggest|tell|give|help|recommend|write|make|show|find|explain|list|plan|remind|create|draft|"
    r"describe|summari[sz]e|translate|send|book|check|compare|calculate|generate|name|pick|choose|let's|let\s+me|"
    r"can|could|would|will|should|do|does|did|is|are|what|how|why|where|when|which|who|any|ideas)\b",
    re.IGNORECASE,
)
_NOT_ABOUT_USER = re.compile(
    r"^(?:i\s+(?:think|guess|wonder|suppose|believe|mean|feel\s+like|was\s+wondering|want\s+you|need\s+you|"
    r"would\s+like\s+you|hope\s+you|appreciate)|i'd\s+like\s+you|i'm\s+(?:not\s+sure|wondering|asking|curious))\b"
    r"|\byou\b|\byour\b|\byou're\b",
    re.IGNORECASE,
)

_JOBS = (
    "nurse|teacher|engineer|developer|doctor|designer|lawyer|writer|artist|chef|cook|manager|accountant|programmer|"
    "scientist|researcher|consultant|photographer|musician|architect|pharmacist|farmer|pilot|driver|mechanic|"
    "electrician|plumber|carpenter|therapist|dentist|hygienist|vet|veterinarian|journalist|editor|analyst|librarian|"
    "firefighter|officer|barista|waiter|waitress|cashier|freelancer|entrepreneur|professor|lecturer|paramedic|"
    "surgeon|translator|baker|student|intern|clerk|receptionist|cleaner|builder|tutor|coach|trainer|caregiver|"
    "social\\s+worker|software\\s+engineer|data\\s+scientist|civil\\s+servant"
)
_PEOPLE = (
    "son|daughter|kid|kids|children|child|baby|mother|mom|mum|father|dad|brother|sister|parents|grandmother|"
    "grandfather|grandma|grandpa|grandparents|family|aunt|uncle|cousin|niece|nephew|friend|best\\s+friend|"
    "flatmate|roommate|housemate|neighbour|neighbor"
)

PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (key, re.compile(pattern, re.IGNORECASE))
    for key, pattern in (
        ("name", rf"\bmy\s+name\s+is\b|\bcall\s+me\b|\b{_I_AM}\s+called\b"),
        (
            "home",
            r"\bi\s+(?:now\s+|currently\s+|still\s+)?live\s+in\b|\b(?:i|we)\s+(?:just\s+|recently\s+|finally\s+)?"
            rf"(?:moved|relocated)\b|\b{_I_AM}\s+(?:now\s+)?(?:based|living)\s+in\b"
            r"|\bmy\s+(?:home|flat|apartment|house)\s+is\s+in\b|\b(?:i've|i\s+have|we've)\s+(?:been\s+)?(?:lived|living)\s+in\b"
            r"|\bof\s+living\s+in\b|\bwe\s+(?:now\s+)?live\s+in\b|\b(?:i'm|we're|i\s+am|we\s+are)\s+(?:still\s+)?renting\b",
        ),
        ("age", rf"\b{_I_AM}\s+\d{{1,3}}\b|\bmy\s+birthday\b|\bi\s+(?:just\s+)?turned\s+\d{{1,3}}\b|\bborn\s+in\s+\d"),
        ("origin", rf"\b{_I_AM}\s+(?:originally\s+)?from\b|\bi\s+grew\s+up\s+in\b|\bi\s+was\s+born\s+in\b"),
        (
            "partner",
            r"\bmy\s+(?:wife|husband|partner|girlfriend|boyfriend|fiancee|fiance|fiancée|fiancé|spouse)\b"
            rf"|\b{_I_AM}\s+(?:married|engaged|divorced|single)\b|\bi\s+got\s+(?:married|engaged|divorced)\b",
        ),
        (
            "pet",
            rf"\bmy\s+(?:{_PETS}|pet|bunny|puppy|kitten)s?\b"
            rf"|\bi\s+(?:have|adopted|got|own)\s+(?:a|an|two|three)\s+(?:\w+\s+)?(?:{_PETS}|puppy|kitten)s?\b",
        ),
        (
            "family",
            rf"\bmy\s+(?:old\s+|little\s+|big\s+|older\s+|younger\s+)?(?:{_PEOPLE})s?\b"
            r"|\bi\s+have\s+(?:a|an|two|three|four)\s+(?:sons?|daughters?|kids|children|brothers?|sisters?)\b",
        ),
        (
            "work",
            r"\bi\s+(?:now\s+|currently\s+|still\s+)?work(?:ed)?\s+(?:as|at|for|in|on)\b"
            r"|\bmy\s+(?:new\s+|old\s+|current\s+)?(?:job|employer|boss|company|shift|colleagues|coworkers)\b"
            rf"|\b{_I_AM}\s+(?:employed|working)\s+(?:as|at|for)\b"
            r"|\bi\s+(?:got|started|found|quit|left|lost)\s+(?:a\s+|my\s+|the\s+)?(?:new\s+)?job\b"
            rf"|\b(?:{_I_AM}|being|life\s+as)\s+(?:a|an)\s+(?:\w+\s+)?(?:{_JOBS})\b",
        ),
        (
            "study",
            r"\bi\s+(?:study|studied|majored|graduated)\b"
            rf"|\b{_I_AM}\s+(?:studying|learning|majoring|in\s+(?:college|school|university|grad\s+school))\b"
            r"|\bmy\s+(?:degree|major|thesis|university|college|classes|exams)\b",
        ),
        (
            "health",
            rf"\b{_I_AM}\s+(?:a\s+)?(?:vegetarian|vegan|pescatarian|allergic|lactose|gluten|diabetic|pregnant|"
            r"celiac|coeliac)\b|\ballergic\s+to\b|\bi\s+(?:don't|do\s+not|can't|cannot)\s+eat\b"
            r"|\bi\s+have\s+(?:a\s+|an\s+)?(?:diabetes|asthma|allergy|allergies|migraines|migraine|arthritis|adhd|"
            r"anxiety|depression|bad\s+back)\b|\bmy\s+(?:doctor|diet|allergy|allergies)\b",
        ),
        ("dislikes", r"\bi\s+(?:really\s+)?(?:hate|dislike|detest|can't\s+stand)\b|\bi\s+(?:don't|do\s+not)\s+like\b"),
        (
            "likes",
            r"\bi\s+(?:really\s+|absolutely\s+|also\s+)?(?:love|like|enjoy|adore|prefer)\b|\bmy\s+favou?rite\b"
            rf"|\b{_I_AM}\s+(?:really\s+)?(?:into|a\s+(?:big\s+)?fan\s+of|passionate\s+about)\b"
            r"|\bmy\s+(?:hobby|hobbies)\b|\bi\s+(?:play|practise|practice)\s+(?:the\s+)?\w+"
            r"|\bi\s+(?:mostly|usually|often)\s+(?:read|watch|listen\s+to)\b"
            r"|\bi\s+(?:finally\s+|just\s+)?(?:started|began|joined|took\s+up)\b",
        ),
        (
            "plans",
            rf"\b{_I_AM}\s+(?:going|planning|hoping)\s+to\b|\bi\s+(?:plan|intend)\s+to\b"
            r"|\bi'll\s+be\b|\bi\s+will\s+be\b",
        ),
        (
            "events",
            r"\bi\s+(?:went|have\s+been|'ve\s+been)\s+to\s+(?:a|an|the|my)\b"
            r"|\bi\s+(?:attended|visited|travelled\s+to|traveled\s+to)\b",
        ),
        (
            "routine",
            r"\bi\s+(?:usually|always|often|normally|mostly)\s+\w+|\bi\s+(?:drive|commute|cycle|get\s+to\s+work)\b"
            r"|\bevery\s+(?:morning|day|evening|night|week|weekend)\b",
        ),
    )
]
assert {key for key, _ in PATTERNS} == set(SUBJECT_KEYS)


@dataclass(frozen=True)
class Statement:
    """A fact to store: its subject's key and its text (`fact_text`)."""

    subject: str
    text: str


def _tidy(clause: str) -> str:
    text = " ".join(clause.split()).rstrip(" ,;:-.!")
    return text[:1].upper() + text[1:] + "."


def _clauses(sentence: str) -> list[str]:
    parts = _CLAUSES.split(sentence)
    # A clause after the first lost its subject ("... and work as a nurse"): it is the user's.
    return [parts[0]] + [part if _FIRST_PERSON.match(part) else f"I {part}" for part in parts[1:]]


def _unmarked(sentence: str) -> str:
    for _ in range(3):
        stripped = _MARKERS.sub("", sentence, count=1)
        if stripped == sentence:
            break
        sentence = stripped
    return sentence


def statements(text: str) -> list[Statement]:
    """The user's statements about themselves in `text`, in order, each once, at most MAX_FACTS_PER_MESSAGE."""
    found: list[Statement] = []
    seen: set[str] = set()
    for raw in _SENTENCES.split(text.replace("\u2019", "'")):
        sentence = _unmarked(raw.strip())
        if not sentence or sentence.endswith("?") or len(sentence) > MAX_SENTENCE_CHARS:
            continue
        for clause in _clauses(sentence):
            clause = clause.strip()
            if not _ABOUT_USER.search(clause) or _REQUEST.match(clause) or _NOT_ABOUT_USER.search(clause):
                continue
            if len(clause.split()) < MIN_WORDS:
                continue
            subject = next((key for key, pattern in PATTERNS if pattern.search(clause)), None)
            if subject is None:
                continue
            statement = Statement(subject=subject, text=fact_text(subject, _tidy(clause)))
            if statement.text.lower() not in seen:
                seen.add(statement.text.lower())
                found.append(statement)
    return found[:MAX_FACTS_PER_MESSAGE]


_QUESTION_START = re.compile(
    r"^(?:what|where|who|whom|whose|when|which|how|why|do|does|did|is|are|was|were|can|could|should|would|will|"
    r"tell|remind|recall|list|describe|name)\b",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    text = text.strip()
    return bool(_QUESTION_START.match(text)) or text.endswith("?")


def is_request(text: str) -> bool:
    """A question, or a request however it ends ("Plan a morning walk for me and my dog.")."""
    return is_question(text) or bool(_REQUEST.match(_unmarked(text.strip())))


def told(text: str) -> str:
    """The sentences of `text` that tell something: neither a question nor a request ("" when none does)."""
    kept = [sentence.strip() for sentence in _SENTENCES.split(text)]
    return " ".join(sentence for sentence in kept if sentence and not is_request(sentence))


# Which subjects a question asks about, by the words it uses ("Where do I live now?" asks about the home city).
_ASKED: list[tuple[str, re.Pattern[str]]] = [
    (key, re.compile(pattern, re.IGNORECASE))
    for key, pattern in (
        ("name", r"\bmy\s+name\b|\bcall\s+me\b|\bwho\s+am\s+i\b|\bwhat\s+am\s+i\s+called\b"),
        (
            "home",
            r"\b(?:live|living|lives|reside|home|city|town|based|address|moved|move|neighbou?rhood|country|flat|"
            r"apartment)\b",
        ),
        ("origin", r"\bwhere\s+(?:am|was)\s+i\s+(?:from|born|raised)\b|\bgrew\s+up\b|\bhometown\b|\boriginally\b"),
        (
            "work",
            r"\b(?:work|working|job|jobs|employer|company|career|profession|occupation|colleagues|boss|office)\b"
            r"|\bfor\s+a\s+living\b",
        ),
        (
            "study",
            r"\b(?:study|studies|studying|studied|degree|major|university|college|school|course|thesis|exams?)\b",
        ),
        ("age", r"\bhow\s+old\b|\bmy\s+age\b|\bbirthday\b|\bwhen\s+was\s+i\s+born\b"),
        (
            "partner",
            r"\b(?:wife|husband|partner|girlfriend|boyfriend|fiancee|fiance|fiancée|fiancé|spouse|married|engaged)\b",
        ),
        ("family", rf"\b(?:{_PEOPLE})(?:'s|s)?\b"),
        ("pet", rf"\b(?:{_PETS}|pet|bunny|puppy|kitten)(?:'s|s)?\b"),
        (
            "health",
            r"\ballerg(?:y|ies|ic)\b|\b(?:diet|vegetarian|vegan|health|medical)\b|\bcan(?:'t|not)\s+eat\b",
        ),
        ("likes", r"\b(?:like|likes|love|loves|enjoy|enjoys|favou?rite|hobby|hobbies|fan)\b"),
        ("dislikes", r"\b(?:hate|hates|dislike|dislikes)\b|\bcan't\s+stand\b|\b(?:don't|do\s+not)\s+like\b"),
        ("plans", r"\b(?:plan|plans|planning|intend)\b|\bgoing\s+to\b|\bnext\s+(?:week|month|year|weekend)\b"),
        ("events", r"\b(?:went|visited|attended|trip|travelled|traveled)\b|\bbeen\s+to\b"),
        ("routine", r"\b(?:usually|routine|commute|daily)\b|\bevery\s+(?:day|morning|evening|night|week)\b"),
    )
]
assert {key for key, _ in _ASKED} == set(SUBJECT_KEYS)


def asked_subjects(question: str) -> set[str]:
    """The subjects a question asks about ("What is my dog's name?": pets); empty when it names none."""
    question = question.replace("\u2019", "'")
    return {key for key, pattern in _ASKED if pattern.search(question)}


_PERSON = re.compile(r"\b(?:i'm|i've|i'd|i'll|i\s+am|i\s+was|i|me|my|mine|myself)\b", re.IGNORECASE)
_YOU = {
    "i'm": "you're",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "i am": "you are",
    "i was": "you were",
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
}


def understood(statement: Statement) -> str:
    """What a statement says, told back to the user: "pets: you have a dog named Rex"."""
    _, said = fact_parts(statement.text)
    addressed = _PERSON.sub(lambda match: _YOU[" ".join(match.group(0).lower().split())], said.rstrip("."))
    return f"{SUBJECTS[statement.subject].label.lower()}: {addressed}"
