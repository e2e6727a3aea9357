"""DIA (dialogue memory): a seeded, procedural set of two people chatting over many dated sessions.

CM (lab/evaluation/memory.py) states each fact in one self-contained user
message. Real chat between two people does not: turns are short and lean on
the one before ("Yeah, it was amazing!", "We went there last summer"), the
answer often sits in the reply *after* the turn that names the topic, many
questions are about time, facts change, and the same words ("amazing",
"concert", a city) come up in many unrelated turns. DIA has all of that.

A conversation is two speakers (the first stored as the `user` role, the
second as `assistant`, as an import of a two-person chat would store them)
over `sessions` sessions, each with a date (`Conversation.dates`, kept as the
messages' `source_created_at`). Questions are asked later, by a third
party, about either speaker; each is labelled with its evidence turns:

- `next_turn`: the topic is named in one turn ("Did you end up going to the
  jazz concert in Lisbon?") and the answer is the reply after it ("Yeah, it
  was amazing, ..."); the reply is the evidence;
- `temporal`: "When did Ana ...?": half elliptical ("Have you ever been to
  Kyoto?" / "We went there last May"; the reply is the evidence), half in one
  dated turn ("I started a pottery class two weeks ago");
- `single`: the fact and its topic in one turn ("my cat Mango ...");
- `updated`: a fact stated, then changed sessions later, sometimes
  elliptically ("Still at the bookshop?" / "Nope, I'm teaching now"); only
  the latest statement is evidence, the earlier one is `stale`;
- `none`: about something never said; the report counts what gets in.

Distractors are many and on purpose: the other speaker's events in other
cities, elliptical opinions about shows and films with the answers' words,
places mentioned without a visit, backchannels ("Haha, same"). Conversation
`i` depends only on (seed, i).
"""

import datetime
import random

from lab.evaluation.memory import Conversation, Question, Turn

NAMES = [
    "Ana", "Ben", "Carla", "Dev", "Emma", "Farid", "Grace", "Hiro", "Isla", "Jamal", "Kira", "Luis",
    "Mira", "Noah", "Olga", "Pedro", "Rosa", "Sam", "Tara", "Umar", "Vera", "Wes", "Yara", "Zoe",
]  # fmt: skip
CITIES = [
    "Lisbon", "Kyoto", "Berlin", "Oaxaca", "Reykjavik", "Marrakech", "Vienna", "Hanoi", "Dublin", "Seoul",
    "Prague", "Cape Town", "Havana", "Istanbul", "Oslo", "Lima", "Naples", "Budapest", "Montreal", "Athens",
]  # fmt: skip
EVENTS = [
    "jazz concert", "food festival", "pottery fair", "film premiere", "comedy night", "art exhibition",
    "book launch", "street parade", "opera", "football match", "flower show", "marathon", "wine fair",
    "theatre play", "light festival", "climbing competition",
]  # fmt: skip
# Reactions that never name what they are about: only the turn before says it.
REACTIONS = [
    "Yeah, it was amazing! I didn't want it to end.",
    "Honestly? A bit of a letdown, way too crowded.",
    "Loved every minute, we stayed until they kicked us out.",
    "It was fine, but I was so tired I left early.",
    "Oh it was incredible, easily the best night this year.",
    "Meh. Overpriced and the sound was terrible.",
    "So much fun! My feet still hurt from all the dancing.",
    "It was okay, not really my thing in the end.",
    "Wonderful, I'd go again tomorrow.",
    "Pretty disappointing, it rained the whole time.",
]
CUES = [
    "Did you end up going to the {event} in {city}?",
    "Wait, wasn't the {event} in {city} this weekend?",
    "So how was the {event} in {city}?",
    "Did you make it to that {event} in {city} in the end?",
]
# Cues that ask nothing: the reply still completes them.
STATEMENT_CUES = [
    "I heard the {event} in {city} was sold out.",
    "My boss went to the {event} in {city} on Saturday.",
    "Saw photos of the {event} in {city} everywhere this week.",
]
WHEN = [
    "last summer", "last May", "two weeks ago", "back in March", "the weekend before last", "last Christmas",
    "in the autumn", "a couple of months ago", "last year in June", "over Easter", "three days ago", "last winter",
]  # fmt: skip
TRIP_CUES = ["Have you ever been to {city}?", "Do you know {city} at all?", "Is {city} worth a visit, you think?"]
TRIP_STATEMENT_CUES = ["Thinking of booking a trip to {city} this year.", "My cousin just moved to {city}."]
TRIP_REPLIES = [
    "Oh! We went there {when}, the food was unreal.",
    "We were there {when}, actually. Rained nonstop but still lovely.",
    "Oh yeah, {when}. I'd move there if I could.",
    "Went {when} with my sister, we walked everywhere.",
]
CLASSES = ["pottery", "salsa", "Spanish", "swimming", "boxing", "guitar", "painting", "first aid", "yoga", "coding"]
STARTS = [
    "I started a {what} class {when}, it's on Thursdays.",
    "Oh, I signed up for {what} lessons {when}, loving it so far.",
    "{When_cap} I finally began {what} classes, should've done it years ago.",
]
PETS = [("cat", ["Mango", "Pixel", "Olive", "Tofu"]), ("dog", ["Biscuit", "Rocket", "Luna", "Pepper"]),
        ("rabbit", ["Clover", "Bean", "Nibbles"]), ("parrot", ["Kiwi", "Captain", "Sunny"])]  # fmt: skip
PET_LINES = [
    "My {pet} {name} chewed through my headphones again, unbelievable.",
    "Sorry, late reply, {name} my {pet} needed a vet check.",
]
JOBS = ["teacher", "nurse", "barista", "graphic designer", "paramedic", "accountant", "chef", "bookseller"]
JOB_FIRST = [
    "Work's been busy, being a {job} in December is chaos.",
    "Long shift today. That's life as a {job}, I guess.",
]
JOB_CUES = ["Still working as a {old}?", "How's the {old} life treating you?"]
JOB_CHANGES = [
    "Nope! I quit last month, I'm a {new} now.",
    "Not anymore, I switched and I'm a {new} these days.",
]
HOMES = ["flat by the river", "house with a garden", "studio downtown", "place near the station"]
HOME_FIRST = ["We're still renting that {home}, the landlord never fixes anything."]
HOME_CHANGES = ["Big news: we moved! We're in a {home} now.", "We finally moved out, it's a {home} this time."]
SHOWS = ["the new sci-fi series", "that documentary about bees", "the cooking show", "the new Bond film",
         "the detective drama", "that anime everyone talks about"]  # fmt: skip
SHOW_CUES = ["Did you watch {show}?", "Have you seen {show} yet?", "What did you make of {show}?"]
CHAT = [
    ("How was your week?", "Busy, but good. Yours?"),
    ("Haha, same here.", "Right?"),
    ("Ugh, Mondays.", "Tell me about it."),
    ("Did you sleep at all?", "Barely, the neighbours again."),
    ("I need a holiday.", "Don't we all."),
    ("Coffee this weekend?", "Yes please, Saturday?"),
    ("That's so true.", "Haha exactly."),
    ("Sorry, crazy day.", "No worries!"),
    ("What are you up to tonight?", "Nothing much, maybe a film."),
    ("I'm cooking pasta again.", "Classic."),
    ("Ha, I knew you'd say that.", "You know me too well."),
    ("Call you later?", "Sure, after eight."),
]
WISHES = ["I'd love to see {city} someday.", "My cousin keeps telling me to visit {city}.",
          "There's a great documentary about {city} on TV tonight."]  # fmt: skip


# The first speaker's turns are stored as the user's, the second's as the assistant's.
ROLES = ("user", "assistant")

# An episode: a few consecutive turns, (speaker offset from its subject, text, key).
Episode = list[tuple[int, str, str]]


def _episodes(rng: random.Random, names: tuple[str, str]) -> tuple[list[Episode], list[Episode], list[Question]]:
    """(episodes placed anywhere, ordered pairs (first, later) placed in that order, questions)."""
    anywhere: list[Episode] = []
    ordered: list[Episode] = []
    questions: list[Question] = []
    cities = rng.sample(CITIES, len(CITIES))
    events = rng.sample(EVENTS, len(EVENTS))
    classes = rng.sample(CLASSES, len(CLASSES))
    jobs = rng.sample(JOBS, 4)
    pets = rng.sample(PETS, 2)
    homes = rng.sample(HOMES, 4)
    for s, name in enumerate(names):
        # next_turn: the cue (by the other speaker) names the event, the reply says how it was.
        for i in range(2):
            event, city = events.pop(), cities.pop()
            key = f"s{s}-event{i}"
            # A third of the cues are statements, not questions.
            asks = rng.random() < 2 / 3
            cue = rng.choice(CUES if asks else STATEMENT_CUES).format(event=event, city=city)
            reaction = rng.choice(REACTIONS) if asks else "I was there! " + rng.choice(REACTIONS)
            anywhere.append([(1, cue, ""), (0, reaction, key)])
            question = rng.choice(
                ["How did {name} like the {event} in {city}?", "What did {name} think of the {event}?"]
            )
            questions.append(Question(question.format(name=name, event=event, city=city), "next_turn", (key,)))
        # temporal, elliptical: the other asks about a city, the reply says when.
        for i in range(2):
            city = cities.pop()
            key = f"s{s}-trip{i}"
            reply = rng.choice(TRIP_REPLIES).format(when=rng.choice(WHEN))
            cue = rng.choice(TRIP_CUES if rng.random() < 2 / 3 else TRIP_STATEMENT_CUES).format(city=city)
            anywhere.append([(1, cue, ""), (0, reply, key)])
            questions.append(Question(f"When did {name} go to {city}?", "temporal", (key,)))
        # temporal, in one dated turn.
        what, when = classes.pop(), rng.choice(WHEN)
        key = f"s{s}-class"
        line = rng.choice(STARTS).format(what=what, when=when, When_cap=when[0].upper() + when[1:])
        anywhere.append([(0, line, key), (1, rng.choice(["Good for you!", "Ooh, fun.", "Nice, how is it?"]), "")])
        questions.append(Question(f"When did {name} start {what} classes?", "temporal", (key,)))
        # single: a pet, named with its kind in one turn.
        pet, pet_name = pets[s][0], rng.choice(pets[s][1])
        key = f"s{s}-pet"
        anywhere.append([(0, rng.choice(PET_LINES).format(pet=pet, name=pet_name), key), (1, "Oh no, poor you!", "")])
        questions.append(Question(f"What is the name of {name}'s {pet}?", "single", (key,)))
        # updated: a job, then (elliptically, one turn after the cue) a new one; only the latest counts.
        old, new = jobs[2 * s], jobs[2 * s + 1]
        first, later = f"s{s}-job-old", f"s{s}-job-new"
        ordered.append([(0, rng.choice(JOB_FIRST).format(job=old), first), (1, "Hang in there!", "")])
        ordered.append(
            [(1, rng.choice(JOB_CUES).format(old=old), ""), (0, rng.choice(JOB_CHANGES).format(new=new), later)]
        )
        questions.append(Question(f"What does {name} do for work now?", "updated", (later,), (first,)))
        # updated: a home, stated in one turn each time.
        first, later = f"s{s}-home-old", f"s{s}-home-new"
        ordered.append([(0, rng.choice(HOME_FIRST).format(home=homes[2 * s]), first), (1, "Ugh, landlords.", "")])
        ordered.append([(0, rng.choice(HOME_CHANGES).format(home=homes[2 * s + 1]), later), (1, "Congrats!!", "")])
        questions.append(Question(f"Where does {name} live now?", "updated", (later,), (first,)))
        # none: an event and a city nobody went to; a class nobody took.
        questions.append(Question(f"What did {name} think of the {events.pop()} in {cities.pop()}?", "none", ()))
        questions.append(Question(f"When did {name} start {classes.pop()} classes?", "none", ()))
        # Distractors: elliptical opinions about shows (the answers' words), wishes about other cities.
        for _ in range(4):
            show = rng.choice(SHOWS)
            anywhere.append([(1, rng.choice(SHOW_CUES).format(show=show), ""), (0, rng.choice(REACTIONS), "")])
        for _ in range(2):
            anywhere.append([(0, rng.choice(WISHES).format(city=rng.choice(CITIES)), ""), (1, "Oh, you should!", "")])
    return anywhere, ordered, questions


def dialogue_generate(*, seed: int, index: int, sessions: int = 20, turns_per_session: int = 30) -> Conversation:
    """One two-speaker history of about `sessions` x `turns_per_session` turns, with its labelled questions."""
    rng = random.Random(f"dia-{seed}-{index}")
    first, second = rng.sample(NAMES, 2)
    dialogue = Conversation(key=f"dia{index:03d}")
    anywhere, ordered, dialogue.questions = _episodes(rng, (first, second))
    # Each episode goes into a session; an ordered pair's first half in the
    # first half of the sessions, its second half in the second.
    half = max(1, sessions // 2)
    placed: list[list[Episode]] = [[] for _ in range(sessions)]
    for episode in anywhere:
        placed[rng.randrange(sessions)].append(episode)
    for i, episode in enumerate(ordered):
        placed[rng.randrange(half) if i % 2 == 0 else rng.randrange(half, sessions)].append(episode)
    date = datetime.datetime(2023, 1, 1, 18, 0, tzinfo=datetime.UTC) + datetime.timedelta(days=rng.randrange(300))
    for episodes in placed:
        date += datetime.timedelta(days=rng.randint(3, 21), minutes=rng.randrange(240))
        dialogue.dates.append(date)
        session: list[Turn] = []
        fillers = max(0, turns_per_session - sum(len(e) for e in episodes)) // 2
        blocks = episodes + [[(0, a, ""), (1, b, "")] for a, b in rng.choices(CHAT, k=fillers)]
        rng.shuffle(blocks)
        # Which speaker is the subject of each block; speakers are 0 and 1.
        for block in blocks:
            subject = rng.randrange(2) if block[0][2] == "" and block[1][2] == "" else _subject(block)
            for offset, text, key in block:
                session.append(Turn(role=ROLES[(subject + offset) % 2], text=text, key=key))
        dialogue.sessions.append(session)
    return dialogue


def _subject(block: Episode) -> int:
    # A fact's key names its speaker ("s0-...", "s1-..."): the block's subject is that speaker.
    key = next(key for _, _, key in block if key)
    return int(key[1])


def dialogues_generate(*, seed: int, count: int, sessions: int = 20) -> list[Conversation]:
    return [dialogue_generate(seed=seed, index=i, sessions=sessions) for i in range(count)]
