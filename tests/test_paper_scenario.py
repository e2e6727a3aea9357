"""The paper's scenario as a user lives it: the web API, a real worker, real PostgreSQL, the shipped defaults
(facts on, DELLM_FACTS_CONTEXT=replace, the offline responder and extractor)."""

import pytest

from chat.models import Message
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def chat(api, thread, start_worker):
    """Post a message, wait for its reply and for the facts the worker draws from it; the reply's text."""
    start_worker()

    def chat(text: str, facts: int = 0) -> str:
        posted = api.post(f"/api/threads/{thread.pk}/messages/", {"content": text}, format="json")
        assert posted.status_code == 202, posted.content
        turn = posted.json()["turn"]["id"]
        done = wait_for(lambda: (body := api.get(f"/api/turns/{turn}/").json())["status"] == "done" and body)
        # A user types the next message after the facts pass that follows this turn (a fraction of a second).
        drawn = Message.objects.filter(
            owner=thread.owner, role="fact", in_edges__source_id=posted.json()["message"]["id"]
        )
        wait_for(lambda: drawn.count() == facts)
        return done["reply"]["content"]

    return chat


def purge(api, words: str) -> None:
    preview = api.post("/api/deletions/", {"select": {"exact": words}, "mode": "purge"}, format="json")
    assert preview.status_code == 201, preview.content
    confirmed = api.post(f"/api/deletions/{preview.json()['id']}/confirm/")
    assert confirmed.json()["status"] == "executed"


def test_after_paris_is_purged_the_dogs_name_is_answered_and_the_city_is_not(api, chat):
    assert chat("I live in Paris.", facts=1) == "Noted — home city: you live in Paris."
    chat("My favourite food is ramen.", facts=1)
    chat("Any ideas for a weekend trip?")
    assert chat("I have a dog named Rex.", facts=1) == "Noted — pets: you have a dog named Rex."
    walk = chat("Plan a morning walk for me and my dog near where I live.")
    assert "Paris" in walk

    purge(api, "I live in Paris")

    answer = chat("What is my dog's name?")
    assert answer == "From what you told me: “I have a dog named Rex.”"
    assert "Paris" not in answer


def test_where_do_i_live_now_answers_the_current_city_first(chat):
    chat("I live in Lisbon and work as a nurse.", facts=2)
    chat("I moved to Porto last week.", facts=1)
    assert chat("Where do I live now?") == "From what you told me: “I moved to Porto last week.”"
