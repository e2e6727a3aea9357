"""The offline extractor (chat/statements.py): what it keeps, what it never keeps, and that it stays linear."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chat import statements as extractor
from chat.statements import MAX_FACTS_PER_MESSAGE, statements
from chat.subjects import SUBJECTS


@pytest.mark.parametrize(
    ("said", "facts"),
    [
        (
            "I live in Lisbon and work as a nurse at the children's hospital.",
            ["Home city: I live in Lisbon.", "Work and job: I work as a nurse at the children's hospital."],
        ),
        ("My dog is called Biscuit, a beagle.", ["Pets: My dog is called Biscuit, a beagle."]),
        (
            "I moved to Porto last week, the new flat is great.",
            ["Home city: I moved to Porto last week, the new flat is great."],
        ),
        ("Hi! So I'm 34 and I love hiking.", ["Age and birthday: I'm 34.", "Likes and hobbies: I love hiking."]),
        (
            "Can you help me? My wife is a teacher and I have two kids.",
            ["Partner: My wife is a teacher.", "Family and friends: I have two kids."],
        ),
        (
            "Had to skip the dessert because I\u2019m allergic to peanuts.",
            ["Diet and health: Had to skip the dessert because I'm allergic to peanuts."],
        ),
        (
            "Honestly, being a barista in December is chaos for me.",
            ["Work and job: Being a barista in December is chaos for me."],
        ),
        (
            "We finally moved out, it's a flat by the river this time.",
            ["Home city: We finally moved out, it's a flat by the river this time."],
        ),
    ],
)
def test_statements_about_the_user_are_kept_under_their_subject(said, facts):
    assert [statement.text for statement in statements(said)] == facts


@pytest.mark.parametrize(
    "said",
    [
        "Suggest a weekend walk for me and my dog near home.",
        "Which city did I move to most recently?",
        "Tell me a joke about my cat.",
        "I think your answer about my job is great.",
        "I like that you remembered.",
        "The weather was grey all day.",
        "Thanks, that helps me a lot.",
        "Do I live in Lisbon?",
        "",
    ],
)
def test_requests_questions_and_remarks_to_the_assistant_are_never_facts(said):
    assert statements(said) == []


@given(st.text(alphabet=st.sampled_from(list("I my live in work and, .?!'\nabc")), max_size=400))
def test_facts_are_the_users_own_words_under_a_known_subject(text):
    found = statements(text)
    assert len(found) <= MAX_FACTS_PER_MESSAGE
    words = set(text.replace("\u2019", "'").lower().split())
    for statement in found:
        label, _, said = statement.text.partition(": ")
        assert label == SUBJECTS[statement.subject].label
        # Tidying only capitalises, trims punctuation and adds "I" to a clause that lost its subject.
        assert {w.strip(".,;:!-").lower() for w in said.split()} - {w.strip(".,;:!-") for w in words} <= {"i"}


def test_no_expression_repeats_a_group_so_matching_stays_linear():
    expressions = [pattern for _, pattern in extractor.PATTERNS + extractor._ASKED]
    expressions += [
        extractor._QUESTION_START,
        extractor._PERSON,
        extractor._SENTENCES,
        extractor._CLAUSES,
        extractor._MARKERS,
        extractor._ABOUT_USER,
        extractor._REQUEST,
    ]
    for expression in expressions:
        # A group followed by *, + or {n,}: the shape that backtracks (nested quantifiers).
        assert re.search(r"\)(?:[*+]|\{\d+,\})", expression.pattern) is None, expression.pattern
