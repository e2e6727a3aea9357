import pytest

from core.errors import NotFound, ValidationFailed
from provenance.deletions.forget_phrases import DeletionSelection, parse_deletion_request, resolve_deletion_request
from tests.factories import make_message, make_thread

REQUESTS = [
    ("forget that I live in Paris", DeletionSelection("semantic", text="I live in Paris")),
    ("Please forget that I live in Paris.", DeletionSelection("semantic", text="I live in Paris")),
    ("Forget the fact that I'm allergic to nuts!", DeletionSelection("semantic", text="I'm allergic to nuts")),
    ("forget that I told you I live in Paris", DeletionSelection("semantic", text="I live in Paris")),
    ("Forget I live in Paris", DeletionSelection("semantic", text="I live in Paris")),
    ("forget my phone number", DeletionSelection("semantic", text="my phone number")),
    ("Forget about my divorce.", DeletionSelection("semantic", text="my divorce")),
    ("delete what I said about my job", DeletionSelection("semantic", text="my job")),
    ("Can you forget everything I told you about my ex?", DeletionSelection("semantic", text="my ex")),
    ("could you please delete everything you know about my health", DeletionSelection("semantic", text="my health")),
    ("Erase all messages mentioning my salary", DeletionSelection("semantic", text="my salary")),
    ("remove the messages where I talked about Bob", DeletionSelection("semantic", text="Bob")),
    ("get rid of what I said about my landlord", DeletionSelection("semantic", text="my landlord")),
    ("Remove my address from your memory", DeletionSelection("semantic", text="my address")),
    ("wipe anything I mentioned about my kids from your memory", DeletionSelection("semantic", text="my kids")),
    ("remove message 12", DeletionSelection("seqs", seqs=(12,))),
    ("Delete message #7.", DeletionSelection("seqs", seqs=(7,))),
    ("forget #5", DeletionSelection("seqs", seqs=(5,))),
    ("delete messages 3, 4 and 7", DeletionSelection("seqs", seqs=(3, 4, 7))),
    ("please erase msg 9 & 2", DeletionSelection("seqs", seqs=(2, 9))),
    ('delete "my password is hunter2"', DeletionSelection("exact", text="my password is hunter2")),
    ("wipe “my PIN is 1234”", DeletionSelection("exact", text="my PIN is 1234")),
    # A quoted identifier is matched as that identifier (never "hunter22"); a quoted phrase word for word.
    ("delete 'hunter2' from memory", DeletionSelection("identifier", text="hunter2")),
    ('Remove every message containing "Acme Corp"', DeletionSelection("exact", text="Acme Corp")),
    ('forget what I said: "the code is 4711"', DeletionSelection("exact", text="the code is 4711")),
    ("delete messages containing hunter2", DeletionSelection("identifier", text="hunter2")),
    ("Purge everything that contains 555-0199", DeletionSelection("identifier", text="555-0199")),
    # Identifiers, named alone or in a phrasing: matched as identifiers, never by meaning.
    ("Forget dana@example.org", DeletionSelection("identifier", text="dana@example.org")),
    ("forget key prod_7f3a", DeletionSelection("identifier", text="key prod_7f3a")),
    ("forget @dana_k", DeletionSelection("identifier", text="@dana_k")),
    (
        "Delete my old phone number +351 912 345 678 please",
        DeletionSelection("identifier", text="my old phone number +351 912 345 678"),
    ),
    (
        "forget that my email is dana@example.org",
        DeletionSelection("identifier", text="that my email is dana@example.org"),
    ),
    (
        "forget my IBAN PT50 0002 0123 1234 5678 9015 4",
        DeletionSelection("identifier", text="my IBAN PT50 0002 0123 1234 5678 9015 4"),
    ),
]

ORDINARY = [
    "I forgot my keys",
    "how do I delete a file in git?",
    "Can you remove the background from a photo?",
    "Don't forget that I have a meeting at 3",
    "Forget it.",
    "Forget I asked.",
    "forget about it",
    "Never mind, forget that",
    "Delete the file foo.txt",
    "Remove the duplicates from list_2 in my script",
    "Delete order 123456 from the spreadsheet I sent",
    "Remove duplicates from this list: 1, 2, 2, 3",
    "How do I remove a message in Slack?",
    "What does git rm do? Does it delete files?",
    "I deleted my Facebook account",
    "Erase the whiteboard",
    "remove message 12 from the queue",
    'delete "foo.txt" in my repo',
    'how do I delete "foo.txt"?',
    "Forget the milk",
    "Purge the cache",
    "I want to forget that day",
    "You can forget that idea",
    "Who forgot to delete the logs?",
    "Could you delete the second paragraph of my essay?",
    "Remove the message from the bottle",
    "delete",
    "forget everything",
    "remove my name from the document",
    "Deleting old emails is hard",
    "The remove button doesn't work",
    "forgetting things is normal",
    "My password is hunter2",
    "I live in Paris",
    "",
    "   ",
    "forget that\nand also tell me a joke",
]


@pytest.mark.parametrize(("text", "expected"), REQUESTS)
def test_parse_deletion_request_recognizes_requests(text, expected):
    assert parse_deletion_request(text) == expected


@pytest.mark.parametrize("text", ORDINARY)
def test_parse_deletion_request_leaves_ordinary_messages_alone(text):
    assert parse_deletion_request(text) is None


def test_parse_deletion_request_ignores_very_long_text():
    assert parse_deletion_request("forget that " + "x " * 2000) is None
    assert parse_deletion_request("forget that" + " " * 50_000 + "x") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Trailing words repeated: the tail pattern once tried 2**n ways to split the spaces.
        (
            "forget that I like tea" + " please" * 60 + " x",
            DeletionSelection(kind="semantic", text="I like tea please" + " please" * 59 + " x"),
        ),
        ("forget x" + " from memory" * 60 + " y", None),
        ("forget that I like tea" + ", now" * 60, DeletionSelection(kind="semantic", text="I like tea")),
    ],
)
def test_parse_deletion_request_is_linear_on_repeated_trailing_words(text, expected):
    assert parse_deletion_request(text) == expected


def test_resolve_deletion_request_maps_seq_to_the_owners_ids(owner, other_owner, thread):
    theirs = make_message(make_thread(other_owner))
    first, second = make_message(thread), make_message(thread)
    assert (first.seq, second.seq, theirs.seq) == (1, 2, 1)
    assert resolve_deletion_request(owner=owner, text="delete messages 1 and 2") == {"ids": [first.pk, second.pk]}
    assert resolve_deletion_request(owner=other_owner, text="delete message 1") == {"ids": [theirs.pk]}


def test_resolve_deletion_request_refuses_unknown_numbers_and_ordinary_text(owner, thread):
    make_message(thread)
    with pytest.raises(NotFound, match="no message #3"):
        resolve_deletion_request(owner=owner, text="delete message 3")
    with pytest.raises(ValidationFailed):
        resolve_deletion_request(owner=owner, text="how do I delete a file in git?")


def test_resolve_deletion_request_keeps_exact_and_semantic_text(owner):
    assert resolve_deletion_request(owner=owner, text='delete "hunter 2"') == {"exact": "hunter 2"}
    assert resolve_deletion_request(owner=owner, text='delete "hunter2"') == {"identifier": "hunter2"}
    assert resolve_deletion_request(owner=owner, text="forget that I live in Paris") == {"semantic": "I live in Paris"}
