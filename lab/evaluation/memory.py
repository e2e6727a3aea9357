"""CM (conversational memory): a seeded, procedural benchmark of long multi-session chats.

Each conversation is one user's history: sessions of everyday chatter with a
patient assistant, in which personal facts are stated once, in passing,
inside longer sentences. Later, in a fresh thread, the user asks about them
in other words. Every question is labelled with its evidence messages:

- `paraphrase`: asked without the words of the statement ("What do I do for
  a living?" for "...twelve hours on the ward, being a nurse is...");
- `anchored`: asked with a name or rare word the statement holds ("When did
  I go to the pottery workshop?");
- `indirect`: a reference whose meaning was stated sessions earlier ("What
  could I do this weekend in my city?" needs "I've lived in Porto...");
- `updated`: the fact changed later (a move, a new job); only the latest
  statement is evidence;
- `none`: nothing in the history answers it; the right context is empty or
  unrelated, and the report counts what got in;
- `temporal`: asked by when it happened ("Which event was it that I went
  to in March 2024?"): the evidence is every event said in that month. Sessions are
  dated, one every SESSION_GAP from SESSION_START (stored as an import's
  source times), so the month is known; these questions come last, drawn
  from their own generator, so the other kinds' conversations are unchanged.

Conversation `i` depends only on (seed, i). Facts, fillers and questions are
drawn from pools wide enough that words repeat across unrelated messages,
as they do in real chats (names, places, "work", "weekend").
"""

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

FIRST_NAMES = [
    "Maya", "Jonas", "Priya", "Tomás", "Leila", "Hugo", "Ines", "Kwame", "Sofia", "Ravi", "Elena", "Marcus",
    "Aiko", "Nadia", "Felix", "Zara", "Oscar", "Lena", "Samir", "Chloe", "Diego", "Hannah", "Yusuf", "Greta",
]  # fmt: skip
CITIES = [
    "Porto", "Denver", "Osaka", "Krakow", "Nairobi", "Leeds", "Montreal", "Valencia", "Tbilisi", "Adelaide",
    "Ghent", "Halifax", "Cusco", "Bergen", "Austin", "Lyon", "Hanoi", "Tallinn", "Seville", "Utrecht",
]  # fmt: skip
JOBS = [
    ("nurse", "twelve hours on the ward today"), ("carpenter", "sanded cabinets in the workshop all day"),
    ("pharmacist", "the dispensary queue never ended"), ("bus driver", "the 42 route was jammed all morning"),
    ("architect", "the client wants the floor plans redrawn again"),
    ("veterinarian", "three cats and a goat at the clinic"),
    ("pastry chef", "up at four for the croissant dough"), ("librarian", "shelving returns until closing time"),
    ("electrician", "rewired a whole flat today"), ("translator", "forty pages of a contract into Spanish"),
    ("firefighter", "two call-outs before lunch"), ("dental hygienist", "scaling teeth since eight"),
]  # fmt: skip
PETS = ["dog", "cat", "parrot", "rabbit", "tortoise", "hamster", "ferret", "iguana"]
PET_NAMES = ["Biscuit", "Pepper", "Mango", "Ziggy", "Noodle", "Olive", "Captain", "Juniper", "Pickles", "Waffles"]
HOBBIES = [
    "knitting scarves", "bouldering at the climbing gym", "baking sourdough", "painting watercolours",
    "birdwatching by the lake", "playing chess online", "doing yoga at sunrise", "gardening on the balcony",
    "swimming laps", "building model trains", "running along the river", "journaling",
]  # fmt: skip
INSTRUMENTS = ["cello", "ukulele", "trumpet", "piano", "drums", "violin", "banjo", "saxophone", "harp", "flute"]
FOODS = ["peanuts", "shellfish", "gluten", "strawberries", "sesame", "eggs", "kiwi", "soy"]
CARS = ["a rusty Volvo estate", "a tiny electric Fiat", "an old Land Rover", "a red Mazda hatchback", "a camper van"]
EVENTS = [
    "pottery workshop", "salsa class", "charity fun run", "book club meeting", "jazz concert", "wine tasting",
    "support group meeting", "science museum late night", "farmers market", "stand-up comedy show",
    "photography walk", "board game cafe evening", "volunteer beach cleanup", "open-air cinema night",
]  # fmt: skip
DAYS = ["last Monday", "on Tuesday", "on Friday night", "last weekend", "on Sunday morning", "two days ago"]
RELATIONS = ["sister", "brother", "cousin", "best friend", "neighbour", "flatmate"]
# When session 1 was said, and the time between sessions: 20 sessions span January to May 2024.
SESSION_START = datetime(2024, 1, 8, 18, tzinfo=UTC)
SESSION_GAP = timedelta(days=7)

# Everyday filler: words overlap with the facts' vocabulary on purpose.
FILLER = [
    "The weather has been {adj} all week, I barely left the house.",
    "I watched a documentary about {topic} last night, it was {adj}.",
    "Work was {adj} today, lots of emails and one long meeting.",
    "I'm thinking about cooking {dish} for dinner, any tips?",
    "My phone battery keeps dying, I should get it checked.",
    "I finally finished that novel about {topic}, the ending was {adj}.",
    "Traffic this morning was {adj}, took me forever to get anywhere.",
    "I've been trying to drink more water and sleep earlier.",
    "Do you think it's worth learning {language} at my age?",
    "A friend sent me a funny video about {topic}, I laughed a lot.",
    "I need to buy a present for a colleague's birthday this weekend.",
    "The new cafe near the station makes {adj} coffee.",
    "I was reading the news about {topic} and it made me think.",
    "We had a team lunch, I ordered {dish} and it was {adj}.",
    "I cleaned the whole kitchen today, it feels great.",
    "My back hurts a bit from sitting at the desk all day.",
    "There's a festival in town next month, maybe I'll go.",
    "I'm planning to repaint the living room {colour}.",
    "Someone at the gym recommended a podcast about {topic}.",
    "I lost my keys again and found them in the fridge, somehow.",
    "My weekend was quiet, mostly reading and a long walk.",
    "Do you know a good recipe for {dish}?",
    "I booked a dentist appointment for next week, not looking forward to it.",
    "The neighbours were having a party until 2 am.",
]
ADJ = ["great", "awful", "strange", "lovely", "exhausting", "boring", "surprising", "grey", "wonderful", "chaotic"]
TOPICS = ["octopuses", "the moon landing", "ancient Rome", "volcanoes", "bees", "jazz history", "deep sea fish", "AI"]
DISHES = ["lasagna", "a Thai curry", "mushroom risotto", "tacos", "lentil soup", "dumplings", "paella", "ramen"]
LANGUAGES = ["Italian", "Japanese", "German", "Portuguese", "Korean", "Greek"]
COLOURS = ["sage green", "light blue", "warm white", "terracotta"]
REPLIES = [
    "That sounds {adj2}! How did it make you feel?",
    "Thanks for telling me. Anything you'd like help with?",
    "Interesting! Tell me more when you have time.",
    "I'll keep that in mind.",
    "Oh, I hope the rest of your day goes well.",
    "Good to hear from you. What else is on your mind?",
]
ADJ2 = ["lovely", "like a lot", "intense", "fun", "tiring"]


@dataclass(frozen=True)
class Turn:
    role: str
    text: str
    key: str = ""  # the fact this message states ("" for filler)


@dataclass(frozen=True)
class Question:
    text: str
    kind: str  # paraphrase, anchored, indirect, updated, none
    evidence: tuple[str, ...]  # fact keys; empty for `none`
    stale: tuple[str, ...] = ()  # earlier statements an `updated` fact replaced (not evidence)


@dataclass
class Conversation:
    key: str
    sessions: list[list[Turn]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    # Each session's date, when the data has them (stored as its messages' source_created_at).
    dates: list[datetime] = field(default_factory=list)


def _facts(rng: random.Random) -> tuple[list[tuple[str, str]], list[Question], list[Question]]:
    """(key, statement) facts, answerable questions, and questions that have no answer."""
    facts: list[tuple[str, str]] = []
    questions: list[Question] = []
    absent: list[Question] = []
    city, new_city = rng.sample(CITIES, 2)
    job, job_day = rng.choice(JOBS)
    pet, pet_name = rng.choice(PETS), rng.choice(PET_NAMES)
    hobby = rng.choice(HOBBIES)
    instrument = rng.choice(INSTRUMENTS)
    food = rng.choice(FOODS)
    car = rng.choice(CARS)
    relation = rng.choice(RELATIONS)
    relative, friend = rng.sample(FIRST_NAMES, 2)
    friend_city = rng.choice([c for c in CITIES if c not in (city, new_city)])
    events = rng.sample(EVENTS, 3)

    facts.append(
        ("city", f"Honestly, after {rng.randint(2, 9)} years of living in {city} I still get lost in the old town.")
    )
    questions.append(Question("Which city do I live in?", "paraphrase", ("city",)))
    questions.append(Question("Any ideas for things to do this weekend around my city?", "indirect", ("city",)))
    facts.append(("job", f"So tired, {job_day}. Being a {job} is not for the faint-hearted."))
    questions.append(Question("What do I do for a living?", "paraphrase", ("job",)))
    facts.append(("pet", f"My {pet} {pet_name} knocked a glass off the table this morning, classic {pet_name}."))
    questions.append(Question(f"What's the name of my {pet}?", "anchored", ("pet",)))
    questions.append(Question("Do I have any animals at home?", "paraphrase", ("pet",)))
    facts.append(("hobby", f"Spent the whole evening {hobby}, it's the one thing that really calms me down."))
    questions.append(Question("What do I usually do to destress?", "paraphrase", ("hobby",)))
    facts.append(("relative", f"My {relation} {relative} is coming to stay with me for a few days next month."))
    questions.append(Question(f"What's my {relation}'s name?", "anchored", ("relative",)))
    questions.append(Question(f"Who is {relative}?", "anchored", ("relative",)))
    facts.append(("friend", f"My old friend {friend} just moved to {friend_city} for a new job."))
    questions.append(Question(f"Where does {friend} live now?", "anchored", ("friend",)))
    for i, event in enumerate(events):
        day = rng.choice(DAYS)
        facts.append((f"event{i}", f"{day.capitalize()} I went to a {event} and it was {rng.choice(ADJ)}."))
        questions.append(Question(f"When did I go to the {event}?", "anchored", (f"event{i}",)))
    if rng.random() < 0.5:
        facts.append(("instrument", f"My fingers hurt, I practised the {instrument} for two hours straight."))
        questions.append(Question("Which musical instrument am I learning?", "paraphrase", ("instrument",)))
    else:
        absent.append(Question("Which musical instrument do I play?", "none", ()))
    if rng.random() < 0.5:
        facts.append(("allergy", f"Had to skip the dessert at the party because I'm allergic to {food}."))
        questions.append(Question("Is there any food I can't eat?", "paraphrase", ("allergy",)))
    else:
        absent.append(Question("Do I have any food allergies?", "none", ()))
    if rng.random() < 0.5:
        facts.append(("car", f"Took {car} to the mechanic again, that thing eats my savings."))
        questions.append(Question("What kind of vehicle do I drive?", "paraphrase", ("car",)))
    else:
        absent.append(Question("What car do I own?", "none", ()))
    absent.append(Question("What's my favourite football team?", "none", ()))
    absent.append(Question("How many children do I have?", "none", ()))
    absent.append(Question("What university did I study at?", "none", ()))
    # Updates: stated later, in other words; only the latest counts.
    new_job, new_day = rng.choice([j for j in JOBS if j[0] != job])
    facts.append(("city2", f"Big news: I packed everything and moved to {new_city}, the flat is full of boxes."))
    questions.append(Question("Where do I live now?", "updated", ("city2",)))
    facts.append(("job2", f"First week at my new job, I'm a {new_job} now. {new_day.capitalize()}."))
    questions.append(Question("What's my current job?", "updated", ("job2",)))
    questions.append(Question("Recommend a good restaurant in my city.", "indirect", ("city2",)))
    return facts, questions, absent


def _filler(rng: random.Random) -> str:
    return rng.choice(FILLER).format(
        adj=rng.choice(ADJ),
        topic=rng.choice(TOPICS),
        dish=rng.choice(DISHES),
        language=rng.choice(LANGUAGES),
        colour=rng.choice(COLOURS),
    )


def conversation_generate(*, seed: int, index: int, sessions: int = 20, turns_per_session: int = 15) -> Conversation:
    """One history of `sessions` x `turns_per_session` exchanges (user message + assistant reply)."""
    rng = random.Random(f"cm-{seed}-{index}")
    facts, questions, absent = _facts(rng)
    conversation = Conversation(key=f"cm{index:03d}")
    # Updates come after the fact they replace: the first facts go in the
    # first half of the history, the updates (last two) in the second half.
    originals, updates = facts[:-2], facts[-2:]
    half = sessions * turns_per_session // 2
    slots = rng.sample(range(half), len(originals)) + rng.sample(range(half, 2 * half), len(updates))
    by_slot = dict(zip(slots, originals + updates, strict=True))
    for s in range(sessions):
        session: list[Turn] = []
        for t in range(turns_per_session):
            fact = by_slot.get(s * turns_per_session + t)
            if fact is None:
                session.append(Turn("user", _filler(rng)))
            else:
                session.append(Turn("user", fact[1], key=fact[0]))
            session.append(Turn("assistant", rng.choice(REPLIES).format(adj2=rng.choice(ADJ2))))
        conversation.sessions.append(session)
    conversation.dates = [SESSION_START + SESSION_GAP * s for s in range(sessions)]
    conversation.questions = questions + absent + _temporal(conversation, seed=seed, index=index)
    return conversation


def _temporal(conversation: Conversation, *, seed: int, index: int) -> list[Question]:
    """One question per month in which an event was said: which event, by month; evidence all of that month's."""
    assert conversation.dates is not None
    by_month: dict[tuple[int, int], list[str]] = {}
    for said, session in zip(conversation.dates, conversation.sessions, strict=True):
        for turn in session:
            if turn.key.startswith("event"):
                by_month.setdefault((said.year, said.month), []).append(turn.key)
    rng = random.Random(f"cm-time-{seed}-{index}")
    questions = []
    for (year, month), keys in sorted(by_month.items()):
        name = datetime(year, month, 1).strftime("%B")
        # "went" is the events' own word: all of them are found, and only their time tells them apart.
        text = rng.choice(["Which event was it that I went to in {m} {y}?", "What was the thing I went to in {m} {y}?"])
        questions.append(Question(text.format(m=name, y=year), "temporal", tuple(keys)))
    return questions


def conversations_generate(*, seed: int, count: int, sessions: int = 20) -> list[Conversation]:
    return [conversation_generate(seed=seed, index=i, sessions=sessions) for i in range(count)]


def tofu_conversation(*, rows: list[dict], authors: int, questions: int, seed: int) -> Conversation:
    """A robustness check on other data: TOFU's answers as one user's history, its questions asked later.

    TOFU has 20 question/answer pairs per fictitious author, in order. The
    first `authors` authors' answers become the history, one session per
    author (each answer a user message followed by a short reply), and a
    seeded sample of `questions` of their questions is asked, each with its
    own answer as the evidence.
    """
    rng = random.Random(f"cm-tofu-{seed}")
    conversation = Conversation(key="tofu")
    pairs = rows[: authors * 20]
    for start in range(0, len(pairs), 20):
        session = []
        for i, row in enumerate(pairs[start : start + 20], start):
            session.append(Turn("user", row["answer"], key=f"a{i}"))
            session.append(Turn("assistant", rng.choice(REPLIES).format(adj2=rng.choice(ADJ2))))
        conversation.sessions.append(session)
    for i in sorted(rng.sample(range(len(pairs)), min(questions, len(pairs)))):
        conversation.questions.append(Question(pairs[i]["question"], "tofu", (f"a{i}",)))
    return conversation
