"""A forget request that names an identifier takes the messages holding it, however written, and no neighbour:
through the deletions API, the chat and MCP, with the near misses it kept said in the preview."""

import pytest

from assistant.mcp import tools
from chat.models import Message
from tests.factories import make_message

STATEMENTS = {
    "dana": "My colleague's email is dana@example.org",
    "kim": "Dana Kim writes from dana.kim@example.org",
    "wide": "Her backup address: ＤＡＮＡ@example.org",  # full-width letters: the same address
    "prod": "The production key is prod_7f3a",
    "staging": "The staging key is prod_7f3b",
    "phone": "Call me on +351 912 345 678",
    "old": "My old number was 912-345-679",
    "city": "I live in Porto",
}


@pytest.fixture
def said(thread):
    return {key: make_message(thread, text) for key, text in STATEMENTS.items()}


def preview(api, request: str) -> dict:
    response = api.post("/api/deletions/", {"mode": "soft", "select": {"request": request}}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def keys(said, ids) -> set[str]:
    by_id = {message.pk: key for key, message in said.items()}
    return {by_id[pk] for pk in ids}


@pytest.mark.parametrize(
    ("request_text", "taken", "kept"),
    [
        ("Forget dana@example.org", {"dana", "wide"}, {"kim"}),
        ("forget that my email is DANA@EXAMPLE.ORG", {"dana", "wide"}, {"kim"}),
        ("forget key prod_7f3a", {"prod"}, {"staging"}),
        ('delete "PROD-7F3A"', {"prod"}, {"staging"}),
        ("Delete my phone number 912345678", {"phone"}, {"old"}),
        ("forget +351 912-345-679", {"old"}, {"phone"}),
    ],
)
def test_a_request_naming_an_identifier_takes_it_and_keeps_its_neighbours(api, said, request_text, taken, kept):
    answer = preview(api, request_text)

    assert (answer["selector"], answer["resolved_selector"]) == ("request", "identifier")
    assert keys(said, answer["matched"]) == taken
    assert keys(said, [miss["message"] for miss in answer["resolution"]["near_misses"]]) == kept
    assert all(miss["reason"].startswith("holds another ") for miss in answer["resolution"]["near_misses"])
    assert answer["resolution"]["named"][0]["as"].startswith("the ")


def test_confirming_removes_the_identifier_and_nothing_else(api, said):
    answer = preview(api, "Forget dana@example.org")
    assert api.post(f"/api/deletions/{answer['id']}/confirm/", {}, format="json").status_code == 200

    live = set(Message.objects.filter(status__in=Message.LIVE).values_list("pk", flat=True))
    assert keys(said, live) == set(STATEMENTS) - {"dana", "wide"}


def test_one_clause_holding_the_identifier_is_offered_as_a_redaction(api, thread):
    message = make_message(thread, "My email is dana@example.org. I live in Porto.")
    answer = preview(api, "forget dana@example.org")
    assert answer["redactions"] == [{"message": message.pk, "text": "I live in Porto.", "regenerate": []}]


def test_the_chat_and_mcp_resolve_the_same_way(api, thread, owner, said):
    typed = api.post(f"/api/threads/{thread.pk}/messages/", {"content": "forget key prod_7f3a"}, format="json")
    assert typed.status_code == 200, typed.content
    assert keys(said, typed.json()["deletion"]["matched"]) == {"prod"}

    answer = tools.forget(user=owner, client="probe", base_url="http://x", request="forget key prod_7f3a")
    assert keys(said, answer["deletion"]["matched"]) == {"prod"}
    # An agent reads no text through a preview: a near miss is an id, a kind and a reason.
    assert answer["deletion"]["resolution"]["near_misses"] == [
        {"message": said["staging"].pk, "kind": "code", "reason": "holds another key or id"}
    ]


def test_an_identifier_selection_without_one_is_refused(api, said):
    response = api.post("/api/deletions/", {"mode": "soft", "select": {"identifier": "my address"}}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"identifier": "none found"}
    direct = api.post("/api/deletions/", {"mode": "soft", "select": {"identifier": "dana@example.org"}}, format="json")
    assert keys(said, direct.json()["matched"]) == {"dana", "wide"}


def test_no_redaction_is_offered_that_still_holds_the_identifier(api, thread):
    twice = make_message(thread, "My number is +351 912 345 678. Text me at 912345678 anytime.")
    answer = preview(api, "forget +351 912 345 678")
    assert answer["matched"] == [twice.pk] and answer["redactions"] == []


def test_a_message_holding_the_characters_but_not_the_identifier_is_named_as_a_near_miss(api, thread):
    glued = make_message(thread, "backup:xdana@example.org")
    answer = preview(api, "forget dana@example.org")
    assert answer["matched"] == []
    assert answer["resolution"]["near_misses"] == [
        {"message": glued.pk, "kind": "email", "reason": "holds the same characters"}
    ]


def test_identifier_selections_are_bounded_and_a_requests_threshold_is_only_for_meaning(api, said):
    many = " ".join(f"{n}@example.org" for n in range(21))
    response = api.post("/api/deletions/", {"mode": "soft", "select": {"identifier": many}}, format="json")
    assert (response.status_code, response.json()["error"]["fields"]) == (400, {"identifier": "too many"})
    long = api.post("/api/deletions/", {"mode": "soft", "select": {"identifier": "x" * 1001}}, format="json")
    assert (long.status_code, long.json()["error"]["fields"]) == (400, {"identifier": "too long"})
    select = {"request": "Forget dana@example.org", "threshold": 0.5}
    answer = api.post("/api/deletions/", {"mode": "soft", "select": select}, format="json")
    assert answer.status_code == 201 and keys(said, answer.json()["matched"]) == {"dana", "wide"}
