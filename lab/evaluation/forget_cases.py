"""DeLLM's own adversarial set of forget and update requests (issue 45): written here, generated from templates.

Each case is a few statements the user made, one request in words, and what
must and must not be reachable afterwards: `forget` spans (asked for directly
by their own words, or by the case's question, the top 5 of retrieval must
hold none of them) and `keep` spans (each must still be found by its own
statement). The categories are the shapes a precise deletion gets wrong:
identifiers with near neighbours, the same identifier written another way,
words inside other words, one clause of a compound statement, a topic named in
other words, negations and their near misses, and temporal qualifiers. Values
come from small fixed lists, combined by a seeded generator, so the set is the
same on every run and says nothing about any real person.
"""

import random
from dataclasses import dataclass

CATEGORIES = (
    "identifier_neighbours",
    "identifier_written_otherwise",
    "substring_traps",
    "compound_clauses",
    "topics_paraphrased",
    "negations",
    "temporal",
)
PER_CATEGORY = 32

NAMES = ["Dana", "Ana", "Rui", "Marta", "Ines", "Tomas", "Sofia", "Pedro", "Lena", "Omar", "Yara", "Hugo"]
LONGER = {"Ana": "Anastasia", "Rui": "Ruizinho", "Lena": "Helena", "Omar": "Omari", "Hugo": "Hugues"}
COMPANIES = ["Initech", "Hooli", "Globex", "Umbrella Labs", "Vandelay Imports", "Stark Optics", "Acme Robotics"]
CITIES = ["Lisbon", "Porto", "Berlin", "Madrid", "Oslo", "Kyoto", "Toronto", "Nairobi", "Lima", "Prague"]
FOODS = ["pork", "shellfish", "peanuts", "gluten", "dairy", "eggs", "mushrooms"]
HOBBIES = ["the cello", "chess", "bouldering", "pottery", "salsa", "birdwatching", "sailing"]
DOMAINS = ["example.org", "mail.example.com", "uni.example.pt"]
FULL_WIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}


@dataclass(frozen=True)
class ForgetCase:
    key: str
    category: str
    statements: tuple[str, ...]
    request: str
    question: str
    forget: tuple[str, ...]  # spans that must be unreachable
    keep: tuple[str, ...]  # spans that must stay reachable, each found by its own statement


def _email(rng: random.Random, name: str) -> tuple[str, str]:
    """An address and its neighbour: the same person's other address at the same domain."""
    domain = rng.choice(DOMAINS)
    local = name.lower()
    return f"{local}@{domain}", f"{local}.{rng.choice(['kim', 'work', 'old', 'k'])}@{domain}"


def _key(rng: random.Random) -> tuple[str, str]:
    stem = f"{rng.choice(['prod', 'stage', 'api', 'svc'])}_{rng.randrange(16**4):04x}"
    last = stem[-1]
    return stem, stem[:-1] + ("0" if last != "0" else "1")


def _phone(rng: random.Random) -> tuple[str, str]:
    digits = f"9{rng.randrange(10**8):08d}"
    other = digits[:-1] + str((int(digits[-1]) + 1) % 10)
    return digits, other


def _spaced(digits: str) -> str:
    return f"{digits[:3]} {digits[3:6]} {digits[6:]}"


def _identifier_neighbours(rng: random.Random, n: int) -> ForgetCase:
    name = rng.choice(NAMES)
    kind = n % 3
    if kind == 0:
        mine, other = _email(rng, name)
        statements = (f"{name}'s email is {mine}.", f"{name} also reads {other} now and then.")
        request, question = f"Forget {mine}", f"What is {name}'s email address?"
    elif kind == 1:
        mine, other = _key(rng)
        statements = (f"The production key is {mine}.", f"The staging key is {other}.")
        request, question = f"forget the key {mine}", "Which keys do I have?"
    else:
        mine, other = _phone(rng)
        statements = (f"My mobile number is {_spaced(mine)}.", f"My landline is {_spaced(other)}.")
        request, question = f"Delete my number {_spaced(mine)}", "What are my phone numbers?"
    return ForgetCase(f"id-{n}", "identifier_neighbours", statements, request, question, forget=(mine,), keep=(other,))


def _identifier_written_otherwise(rng: random.Random, n: int) -> ForgetCase:
    name = rng.choice(NAMES)
    kind = n % 4
    if kind == 0:
        mine, other = _email(rng, name)
        written = mine.upper()
    elif kind == 1:
        mine, other = _email(rng, name)
        written = "".join(FULL_WIDTH.get(c, c) for c in mine)
    elif kind == 2:
        mine, other = _phone(rng)
        written = f"+351 {mine[:3]}-{mine[3:6]}-{mine[6:]}"
    else:
        mine, other = _key(rng)
        written = mine.upper().replace("_", "-")
    statements = (f"Save this for {name}: {mine}.", f"And keep {other} for {name}'s team.")
    return ForgetCase(
        f"wr-{n}",
        "identifier_written_otherwise",
        statements,
        f"Forget {written}",
        f"What did I save for {name}?",
        forget=(mine,),
        keep=(other,),
    )


def _substring_traps(rng: random.Random, n: int) -> ForgetCase:
    short = rng.choice(sorted(LONGER))
    long = LONGER[short]
    city, hobby = rng.choice(CITIES), rng.choice(HOBBIES)
    statements = (f"{short} moved to {city} last spring.", f"{long} plays {hobby} every weekend.")
    return ForgetCase(
        f"sub-{n}",
        "substring_traps",
        statements,
        f"Forget everything about {short}",
        f"Who do I know that plays {hobby}?",
        forget=(f"moved to {city}",),
        keep=(f"plays {hobby}",),
    )


def _compound_clauses(rng: random.Random, n: int) -> ForgetCase:
    partner, company, city = rng.choice(NAMES), rng.choice(COMPANIES), rng.choice(CITIES)
    kind = n % 2
    if kind == 0:
        statements = (f"I'm married to {partner} and I work at {company}.",)
        request, forget, keep = "Forget where I work", company, f"married to {partner}"
    else:
        statements = (f"I live in {city} and my partner is {partner}.",)
        request, forget, keep = "Forget where I live", city, f"my partner is {partner}"
    return ForgetCase(
        f"cmp-{n}", "compound_clauses", statements, request, "Tell me about my life.", forget=(forget,), keep=(keep,)
    )


def _topics_paraphrased(rng: random.Random, n: int) -> ForgetCase:
    company, city, food, hobby = rng.choice(COMPANIES), rng.choice(CITIES), rng.choice(FOODS), rng.choice(HOBBIES)
    kind = n % 3
    if kind == 0:
        statements = (f"I quit my old job and joined {company} as an engineer.", f"I play {hobby} on Sundays.")
        request, forget, keep = "Forget my employer", company, f"play {hobby}"
    elif kind == 1:
        statements = (f"Home for me is a small flat in {city}.", f"I play {hobby} on Sundays.")
        request, forget, keep = "Forget where I live", city, f"play {hobby}"
    else:
        statements = (f"I stopped eating {food} two years ago.", f"I play {hobby} on Sundays.")
        request, forget, keep = "Forget my diet", f"eating {food}", f"play {hobby}"
    return ForgetCase(
        f"top-{n}", "topics_paraphrased", statements, request, "What do you know about me?", (forget,), (keep,)
    )


def _negations(rng: random.Random, n: int) -> ForgetCase:
    food = rng.choice(FOODS)
    statements = (f"I don't eat {food}.", f"I eat {food} on holidays with my family.")
    return ForgetCase(
        f"neg-{n}",
        "negations",
        statements,
        f"Forget that I don't eat {food}",
        f"Do I eat {food}?",
        forget=(f"don't eat {food}",),
        keep=("on holidays with my family",),
    )


def _temporal(rng: random.Random, n: int) -> ForgetCase:
    old, new = rng.sample(CITIES, 2)
    statements = (f"Last year I lived in {old}.", f"These days I live in {new}.")
    return ForgetCase(
        f"tmp-{n}",
        "temporal",
        statements,
        "Forget where I lived last year",
        "Where have I lived?",
        forget=(f"lived in {old}",),
        keep=(f"live in {new}",),
    )


_MAKERS = {
    "identifier_neighbours": _identifier_neighbours,
    "identifier_written_otherwise": _identifier_written_otherwise,
    "substring_traps": _substring_traps,
    "compound_clauses": _compound_clauses,
    "topics_paraphrased": _topics_paraphrased,
    "negations": _negations,
    "temporal": _temporal,
}


def forget_cases(*, seed: int = 0, per_category: int = PER_CATEGORY) -> list[ForgetCase]:
    """The set: `per_category` cases of each category, the same for the same seed."""
    rng = random.Random(seed)
    return [_MAKERS[category](rng, n) for category in CATEGORIES for n in range(per_category)]
