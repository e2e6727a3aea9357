"""Forget requests decided by words before meaning: a subject named as a whole, a name as a whole word, and
a statement's polarity; each the nearest statement it must keep beside the one it must take."""

import pytest

from chat.models import Message
from tests.factories import make_message, unit_vector


def preview(api, select: dict) -> dict:
    response = api.post("/api/deletions/", {"mode": "soft", "select": select}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def said(thread, *texts: str) -> list[Message]:
    return [make_message(thread, text) for text in texts]


def test_a_request_about_where_i_work_takes_that_clause_and_keeps_the_marriage(api, thread):
    married, hobby = said(thread, "I'm married to Sam and I work at Initech.", "I play chess on Sundays.")
    answer = preview(api, {"request": "Forget where I work"})
    assert (answer["resolved_selector"], answer["matched"]) == ("subject", [married.pk])
    assert answer["redactions"] == [{"message": married.pk, "text": "I'm married to Sam.", "regenerate": []}]
    assert hobby.pk not in answer["matched"]


@pytest.mark.parametrize(
    ("request_text", "statement"),
    [
        ("Forget my employer", "I quit my old job and joined Hooli as an engineer."),
        ("forget everything about where I live", "Home for me is a small flat in Lima."),
        ("Forget my diet", "I stopped eating shellfish two years ago."),
    ],
)
def test_a_subject_named_in_other_words_finds_the_statement_that_says_it(api, thread, request_text, statement):
    taken, kept = said(thread, statement, "I play chess on Sundays.")
    answer = preview(api, {"request": request_text})
    assert answer["resolved_selector"] == "subject"
    assert taken.pk in answer["matched"] and kept.pk not in answer["matched"]


def test_a_name_is_a_whole_word(api, thread):
    ana, anastasia = said(thread, "Ana moved to Kyoto last spring.", "Anastasia plays the cello.")
    answer = preview(api, {"request": "Forget everything about Ana"})
    assert (answer["resolved_selector"], answer["matched"]) == ("words", [ana.pk])
    assert anastasia.pk not in preview(api, {"words": "ana"})["matched"]


def test_a_negated_statement_keeps_its_opposite(api, thread):
    # The same vector, on purpose: no threshold could tell them apart.
    negative, positive = (
        make_message(thread, text, embedding=unit_vector(1))
        for text in ("I don't eat pork.", "I eat pork on holidays with my family.")
    )
    assert preview(api, {"semantic": "I don't eat pork", "threshold": -1.0})["matched"] == [negative.pk]
    assert preview(api, {"semantic": "I eat pork", "threshold": -1.0})["matched"] == [positive.pk]
    # A topic is no statement: both are about pork.
    assert sorted(preview(api, {"semantic": "pork", "threshold": -1.0})["matched"]) == [negative.pk, positive.pk]


def test_polarity_is_a_verbs_and_any_apostrophe_will_do(api, thread):
    paris, curly = (
        make_message(thread, text, embedding=unit_vector(1))
        for text in ("I live in Paris, not Lyon.", "I don\u2019t eat pork.")
    )
    assert preview(api, {"semantic": "I live in Paris", "threshold": -1.0})["matched"] == [paris.pk]
    assert preview(api, {"semantic": "I don't eat pork", "threshold": -1.0})["matched"] == [curly.pk]


def test_a_subject_takes_the_users_statements_not_any_message_with_its_words(api, thread):
    parcel, born = said(thread, "A parcel from Lisbon arrived for the office.", "I was born in Porto.")
    answer = preview(api, {"request": "Forget where I'm from"})
    assert answer["matched"] == [born.pk]
    assert parcel.pk not in preview(api, {"subject": "work"})["matched"]


@pytest.mark.parametrize(
    ("select", "fields"),
    [
        ({"subject": "weather"}, {"subject": "unknown"}),
        ({"words": "   "}, {"words": "empty"}),
        ({"words": "..."}, {"words": "empty"}),
        ({"words": "a " * 11}, {"words": "too long"}),
    ],
)
def test_bad_words_and_subjects_are_refused(api, thread, select, fields):
    said(thread, "I work at Initech.")
    response = api.post("/api/deletions/", {"mode": "soft", "select": select}, format="json")
    assert (response.status_code, response.json()["error"]["fields"]) == (400, fields)
