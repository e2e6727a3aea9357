"""Identifiers are matched as identifiers: every way of writing one is the same, a neighbour never is."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provenance.deletions.identifiers import Identifier, identifiers_in, same_identifier

LOCAL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=2, max_size=12)
DOMAIN = st.sampled_from(["example.org", "mail.example.com", "uni.pt"])
DIGITS = st.text(alphabet="0123456789", min_size=9, max_size=9).filter(lambda d: d[0] != "0")
CODE = st.tuples(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8),
    # Digits, but not six in a row: those are a number of their own too.
    st.text(alphabet="0123456789abcdef", min_size=3, max_size=8).filter(
        lambda t: any(c.isdigit() for c in t) and not any(t[i : i + 6].isdigit() for i in range(len(t)))
    ),
)
FULL_WIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}


def only(text: str) -> Identifier:
    [identifier] = identifiers_in(text)
    return identifier


def same(a: str, b: str) -> bool:
    return same_identifier(only(a), only(b))


def neighbour(word: str, at: int) -> str:
    """`word` with one character (a letter or digit) changed."""
    index = at % len(word)
    while not word[index].isalnum():
        index = (index + 1) % len(word)
    ch = word[index]
    swapped = "1" if ch == "0" else "0" if ch.isdigit() else "b" if ch == "a" else "a"
    return word[:index] + swapped + word[index + 1 :]


@settings(max_examples=200)
@given(local=LOCAL, domain=DOMAIN, at=st.integers(0, 40))
def test_an_email_address_is_the_same_however_written_and_never_its_neighbour(local, domain, at):
    address = f"{local}@{domain}"
    for written in (
        address.upper(),
        f"<{address}>",
        f"“{address}”.",
        f"mailto:{address}",
        "".join(FULL_WIDTH.get(c, c) for c in address),
    ):
        assert same(f"write to {written} soon", address), written
    assert not same(neighbour(address, at), address)
    assert not same(f"{local}.kim@{domain}", address)


@settings(max_examples=200)
@given(national=DIGITS, at=st.integers(0, 8))
def test_a_phone_number_is_the_same_with_any_separators_or_its_country_code_and_never_one_digit_apart(national, at):
    a, b, c = national[:3], national[3:6], national[6:]
    for written in (f"{a} {b} {c}", f"{a}-{b}-{c}", f"({a}) {b}.{c}", f"+351 {a} {b} {c}", f"00351{national}"):
        assert same(f"call me on {written} tonight", national), written
    # The trunk zero of a national number is not written with the country code.
    assert same(f"0{a} {b} {c}", f"+33 {national}")
    assert not same(neighbour(national, at), national)
    # Two international numbers are the same only digit for digit: another country is another number.
    assert not same(f"+351 {national}", f"+34 {national}")


@settings(max_examples=200)
@given(code=CODE, at=st.integers(0, 20))
def test_a_key_is_the_same_in_any_case_and_separator_and_never_one_character_apart(code, at):
    head, tail = code
    key = f"{head}_{tail}"
    for written in (key.upper(), f"{head}-{tail}", f"`{key}`", f"@{key}"):
        assert same(f"the key is {written}.", key), written
    assert not same(neighbour(key, at), key)


def test_each_kind_is_read_and_described():
    found = identifiers_in(
        "Mail dana@example.org, call +351 912 345 678, pay PT50 0002 0123 1234 5678 9015 4, "
        "see https://www.example.org/a/ and ping @dana_k with key prod_7f3a."
    )
    assert [(i.kind, i.canonical) for i in found] == [
        ("email", "dana@example.org"),
        ("iban", "PT50000201231234567890154"),
        ("url", "example.org/a"),
        ("code", "danak"),
        ("code", "prod7f3a"),
        ("phone", "351912345678"),
    ]
    assert found[0].describe() == "the e-mail address dana@example.org"
    assert found[-1].describe() == "the number +351 912 345 678"


@pytest.mark.parametrize(
    "text",
    [
        "I was born on 2024-05-01 at 10:30",  # a date and a time
        "It cost 85000 euros in 2019",  # an amount and a year
        "Meet at 3pm on the 2nd",
        "I love self-driving cars and rock-and-roll",
        "Delete the file foo.txt",
    ],
)
def test_words_dates_amounts_and_times_are_no_identifiers(text):
    assert identifiers_in(text) == []


def test_look_alike_letters_of_other_scripts_read_as_the_latin_ones():
    # A Cyrillic a (U+0430) and a Greek omicron (U+03BF) in place of the Latin letters.
    assert same("dаna@exаmple.οrg", "dana@example.org")
    assert not same("dana@example.org", "dana@examp1e.org")


@pytest.mark.parametrize(
    "text",
    [
        "1 " * 20_000,
        "a_1 " * 10_000,
        "+" * 40_000,
        ("PT50 " + "0000 " * 8) * 1_000,
        "x@" * 20_000,
        ("a" * 30 + "@") * 1_000,
        "a." * 20_000 + "@",
        "(" * 40_000,
    ],
)
def test_reading_identifiers_is_linear(text):
    started = time.thread_time()
    identifiers_in(text)
    assert time.thread_time() - started < 0.5


def test_a_country_code_is_a_countrys_and_nothing_else():
    assert same("912 345 678", "+351 912 345 678")
    # +44 7912 345 678 is a British number: "447" is no country's code.
    assert not same("912 345 678", "+44 7912 345 678")


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("call 06.12.34.56.78 tonight", [("phone", "0612345678")]),
        ("since 2024-01-15 912 345 678 is mine", [("phone", "912345678")]),
        ("912 345 678 / 913 456 789", [("phone", "912345678"), ("phone", "913456789")]),
        ("pay PT50 0002 0123 1234 5678 9015 4 EUR", [("iban", "PT50000201231234567890154")]),
        ("contact:dana@example.org", [("email", "dana@example.org")]),
        ("Dana\u2014dana@example.org", [("email", "dana@example.org")]),
        ("Tel.912345678", [("code", "tel912345678"), ("phone", "912345678")]),
    ],
)
def test_numbers_and_addresses_are_read_where_they_stand(text, found):
    assert [(i.kind, i.canonical) for i in identifiers_in(text)] == found
