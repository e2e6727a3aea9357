"""PF (persona facts): a seeded, procedural stand-in for the paper's unreleased persona dataset.

Each persona has 10 first-person facts, 5 requests that need some of those
facts without stating them, and 4 questions with a short gold answer and the
fact that supports it; one of the 4 is about the fact to forget, and that fact
always has a request depending on it, so derived replies exist to erase.
Persona `i` depends only on (seed, i): the first n personas are the same
whatever the total count.
"""

import json
import random
from dataclasses import dataclass
from pathlib import Path

from lab.evaluation.datasets import Dataset, Question, Scenario, Statement

FACTS_PER_PERSONA = 10
REQUESTS_PER_PERSONA = 5
QUESTIONS_PER_PERSONA = 4
SAMPLE_PATH = Path(__file__).parent / "data" / "pf_sample.jsonl"
SAMPLE_COUNT = 3

_CITIES = [
    "Lisbon",
    "Krakow",
    "Montreal",
    "Osaka",
    "Nairobi",
    "Valparaiso",
    "Tbilisi",
    "Ghent",
    "Hobart",
    "Tromso",
    "Porto",
    "Bergen",
    "Cusco",
    "Tallinn",
    "Leeds",
    "Marseille",
    "Halifax",
    "Adelaide",
    "Seville",
    "Utrecht",
]
_ANIMALS = ["dog", "cat", "parrot", "rabbit", "tortoise", "hamster", "ferret", "goldfish"]
_PET_NAMES = ["Biscuit", "Pepper", "Mango", "Ziggy", "Noodle", "Olive", "Captain", "Juniper", "Pickles", "Waffles"]
_JOBS = [
    "nurse",
    "carpenter",
    "data analyst",
    "primary school teacher",
    "pharmacist",
    "bus driver",
    "architect",
    "veterinarian",
    "pastry chef",
    "librarian",
    "electrician",
    "translator",
]
_FOODS = ["ramen", "paella", "lasagne", "pho", "falafel", "goulash", "pierogi", "tacos", "risotto", "dumplings"]
_ALLERGENS = ["peanuts", "shellfish", "sesame", "penicillin", "bee stings", "latex", "kiwi fruit", "cat dander"]
_NAMES = [
    "Amara",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Esther",
    "Farid",
    "Greta",
    "Hugo",
    "Ingrid",
    "Jonas",
    "Keiko",
    "Lorenzo",
    "Mireille",
    "Nikhil",
    "Oona",
    "Pavel",
    "Rosa",
    "Soren",
    "Tamsin",
    "Ulrich",
]
_INSTRUMENTS = ["cello", "trumpet", "banjo", "accordion", "harp", "saxophone", "ukulele", "oboe"]
_LANGUAGES = ["Japanese", "Portuguese", "Swahili", "Korean", "Finnish", "Greek", "Turkish", "Dutch"]
_COLORS = ["red", "silver", "dark green", "white", "navy blue", "yellow"]
_CARS = ["hatchback", "pickup truck", "station wagon", "minivan", "convertible", "camper van"]
_SPORTS = ["badminton", "water polo", "rugby", "table tennis", "volleyball", "squash", "handball", "curling"]
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DRINKS = ["green tea", "espresso", "yerba mate", "hot chocolate", "kombucha", "chai"]
_GENRES = ["detective", "science fiction", "historical", "fantasy", "romance", "horror"]
_COUNTRIES = ["Chile", "Vietnam", "Ghana", "Norway", "Portugal", "Mexico", "Poland", "Morocco", "Ireland", "Peru"]
_COMMUTES = ["bicycle", "ferry", "tram", "motorbike", "train", "on foot"]


def _attributes(rng: random.Random) -> dict[str, tuple[str, str, str, str]]:
    """attribute -> (fact, question, gold answer, request that needs the fact without naming it)."""
    pet, pet_name = rng.choice(_ANIMALS), rng.choice(_PET_NAMES)
    color, car = rng.choice(_COLORS), rng.choice(_CARS)
    sport, day = rng.choice(_SPORTS), rng.choice(_WEEKDAYS)
    sister, son, age = rng.choice(_NAMES), rng.choice(_NAMES), rng.randint(4, 16)
    values = {k: rng.choice(pool) for k, pool in _POOLS.items()}
    return {
        "city": (
            f"I live in {values['city']}.",
            "Which city do I live in?",
            values["city"],
            "Can you suggest a few things to do near my home this weekend?",
        ),
        "pet": (
            f"I have a {pet} called {pet_name}.",
            "What is my pet's name?",
            pet_name,
            "Could you suggest a birthday treat for my pet?",
        ),
        "job": (
            f"I work as a {values['job']}.",
            "What do I do for a living?",
            values["job"],
            "Can you help me write a short introduction for a networking event?",
        ),
        "food": (
            f"My favourite food is {values['food']}.",
            "What is my favourite food?",
            values["food"],
            "Could you plan a dinner menu that I would love?",
        ),
        "allergy": (
            f"I am allergic to {values['allergy']}.",
            "What am I allergic to?",
            values["allergy"],
            "What should I be careful about when I eat out or see a doctor?",
        ),
        "sister": (
            f"My sister is called {sister}.",
            "What is my sister's name?",
            sister,
            "Can you help me write a birthday card for my sibling?",
        ),
        "instrument": (
            f"I play the {values['instrument']}.",
            "Which instrument do I play?",
            values["instrument"],
            "What pieces could I practise this month?",
        ),
        "language": (
            f"I am learning {values['language']}.",
            "Which language am I learning?",
            values["language"],
            "How could I practise for my evening classes every day?",
        ),
        "car": (
            f"I drive a {color} {car}.",
            "What car do I drive?",
            f"{color} {car}",
            "What maintenance does my vehicle need before winter?",
        ),
        "sport": (
            f"I play {sport} every {day}.",
            "Which sport do I play?",
            sport,
            "Can you suggest a warm-up routine before my weekly game?",
        ),
        "birthday": (
            f"My birthday is in {values['month']}.",
            "In which month is my birthday?",
            values["month"],
            "Could you help me plan my next birthday party?",
        ),
        "drink": (
            f"I drink {values['drink']} every morning.",
            "What do I drink every morning?",
            values["drink"],
            "What breakfast would go well with my usual morning cup?",
        ),
        "books": (
            f"I mostly read {values['genre']} novels.",
            "What kind of novels do I read?",
            values["genre"],
            "Can you recommend a book for my next holiday?",
        ),
        "childhood": (
            f"I grew up in {values['country']}.",
            "In which country did I grow up?",
            values["country"],
            "Could you suggest a dish from my childhood that I could cook tonight?",
        ),
        "son": (
            f"My son {son} is {age} years old.",
            "What is my son's name?",
            son,
            "Can you suggest a weekend activity for my kid?",
        ),
        "commute": (
            f"I get to work by {values['commute']}.",
            "How do I get to work?",
            values["commute"],
            "How can I make my daily journey to work more pleasant?",
        ),
    }


_POOLS = {
    "city": _CITIES,
    "job": _JOBS,
    "food": _FOODS,
    "allergy": _ALLERGENS,
    "instrument": _INSTRUMENTS,
    "language": _LANGUAGES,
    "month": _MONTHS,
    "drink": _DRINKS,
    "genre": _GENRES,
    "country": _COUNTRIES,
    "commute": _COMMUTES,
}


@dataclass(frozen=True)
class Persona:
    index: int
    facts: tuple[tuple[str, str], ...]
    requests: tuple[tuple[str, str], ...]
    # (question, gold, supporting fact key, forget)
    questions: tuple[tuple[str, str, str, bool], ...]

    def to_json(self) -> dict:
        return {
            "persona": self.index,
            "facts": [{"key": key, "text": text} for key, text in self.facts],
            "requests": [{"key": key, "text": text} for key, text in self.requests],
            "questions": [
                {"text": text, "gold": gold, "fact": fact, "forget": forget}
                for text, gold, fact, forget in self.questions
            ],
        }

    def to_scenario(self) -> Scenario:
        statements = [Statement(key=key, text=text) for key, text in self.facts]
        statements += [Statement(key=key, text=text, fact=False) for key, text in self.requests]
        questions = [
            Question(key=f"q{n}", text=text, gold=gold, fact_key=fact, forget=forget)
            for n, (text, gold, fact, forget) in enumerate(self.questions, start=1)
        ]
        return Scenario(
            key=f"pf{self.index:03d}",
            statements=tuple(statements),
            questions=tuple(questions),
            forget_keys=tuple(q.fact_key for q in questions if q.forget),
        )


def persona_generate(*, index: int, seed: int) -> Persona:
    rng = random.Random(f"pf:{seed}:{index}")
    attributes = _attributes(rng)
    chosen = rng.sample(sorted(attributes), FACTS_PER_PERSONA)
    asked = rng.sample(chosen, QUESTIONS_PER_PERSONA)
    forgotten = rng.choice(asked)
    others = rng.sample([a for a in chosen if a != forgotten], REQUESTS_PER_PERSONA - 1)
    needed = rng.sample([forgotten, *others], REQUESTS_PER_PERSONA)
    return Persona(
        index=index,
        facts=tuple((name, attributes[name][0]) for name in chosen),
        requests=tuple((f"req-{name}", attributes[name][3]) for name in needed),
        questions=tuple((attributes[name][1], attributes[name][2], name, name == forgotten) for name in asked),
    )


def pf_generate(*, count: int, seed: int) -> Dataset:
    scenarios = tuple(persona_generate(index=i, seed=seed).to_scenario() for i in range(count))
    return Dataset(name="pf", scenarios=scenarios)


def pf_mixed_generate(*, count: int, seed: int) -> Dataset:
    """PF with mixed messages: each forget fact shares its message with a retain fact that a question asks about.

    "I live in Lisbon. My sister Amara ..." is one message, so removing the
    whole message loses a retain answer (collateral loss) unless only the
    forget fact's sentence is redacted.
    """
    scenarios = []
    for index in range(count):
        scenario = persona_generate(index=index, seed=seed).to_scenario()
        [forget_key] = scenario.forget_keys
        retained = next(q.fact_key for q in scenario.questions if not q.forget)
        statements = []
        for statement in scenario.statements:
            if statement.key == retained:
                continue
            if statement.key == forget_key:
                text = f"{statement.text} {scenario.text_of(retained)}"
                statement = Statement(key=statement.key, text=text)
            statements.append(statement)
        scenarios.append(
            Scenario(
                key=f"mix{index:03d}",
                statements=tuple(statements),
                questions=scenario.questions,
                forget_keys=scenario.forget_keys,
                forget_parts=((forget_key, scenario.text_of(forget_key)),),
            )
        )
    return Dataset(name="pf-mixed", scenarios=tuple(scenarios))


def pf_sample_lines(*, count: int = SAMPLE_COUNT, seed: int = 0) -> list[str]:
    """The committed sample's lines: the first personas of the default seed."""
    return [json.dumps(persona_generate(index=i, seed=seed).to_json(), sort_keys=True) for i in range(count)]
