"""`/api/facts/` and what a deletion's preview says about facts, over HTTP with the offline model and facts on."""

import pytest

from chat.models import ContextEdge, FactDecline, Message


@pytest.fixture
def say(tell):
    return lambda text: tell(text)["message"]


def facts(api, **query) -> list[dict]:
    response = api.get("/api/facts/", query)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_the_list_shows_each_fact_with_its_subject_state_and_sources(api, say):
    lisbon = say("I live in Lisbon and work as a nurse at the children's hospital.")
    listed = facts(api)
    assert [(f["subject"], f["text"], f["state"]) for f in listed] == [
        ("home", "Home city: I live in Lisbon.", "current"),
        ("work", "Work and job: I work as a nurse at the children's hospital.", "current"),
    ]
    assert [s["id"] for s in listed[0]["sources"]] == [lisbon["id"]]
    assert listed[0]["subject_label"] == "Home city" and listed[0]["extractor"] == "rules"
    assert facts(api, subject="work")[0]["subject"] == "work"


def test_a_newer_statement_supersedes_and_forgetting_it_reinstates_the_older(api, say):
    say("I live in Lisbon.")
    porto = say("I moved to Porto last month.")
    [newer] = facts(api, state="current")
    [older] = facts(api, state="superseded")
    assert "Porto" in newer["text"] and "Lisbon" in older["text"] and older["superseded_by"] == newer["id"]
    assert [h["id"] for h in api.get(f"/api/facts/{newer['id']}/").json()["history"]] == [older["id"]]
    preview = api.post("/api/deletions/", {"mode": "soft", "select": {"ids": [porto["id"]]}}, format="json").json()
    assert preview["facts"]["removed"] == [newer["id"]]
    assert preview["facts"]["reinstated"] == [{"fact": older["id"], "instead_of": newer["id"], "subject": "home"}]
    assert api.post(f"/api/deletions/{preview['id']}/confirm/", {}, format="json").status_code == 200
    assert [f["id"] for f in facts(api, state="current")] == [older["id"]]


def test_a_fact_said_twice_is_rederived_from_the_survivor_after_one_source_goes(
    api, say, django_capture_on_commit_callbacks
):
    first = say("My dog is called Biscuit, a beagle.")
    second = say("My dog is called Biscuit, a beagle.")
    [fact] = facts(api)
    assert sorted(s["id"] for s in fact["sources"]) == [first["id"], second["id"]]
    preview = api.post("/api/deletions/", {"mode": "soft", "select": {"ids": [first["id"]]}}, format="json").json()
    assert preview["facts"]["rederived"] == [{"fact": fact["id"], "sources": [second["id"]], "new": None}]
    with django_capture_on_commit_callbacks(execute=True):
        done = api.post(f"/api/deletions/{preview['id']}/confirm/", {}, format="json").json()
    [again] = facts(api)
    assert again["id"] != fact["id"] and again["text"] == fact["text"]
    assert [s["id"] for s in again["sources"]] == [second["id"]]
    assert api.get(f"/api/deletions/{done['id']}/").json()["facts"]["rederived"][0]["new"] == again["id"]
    # Undo brings the original back and takes the re-derived one away.
    assert api.post(f"/api/deletions/{done['id']}/undo/", {}, format="json").status_code == 200
    assert [f["id"] for f in facts(api)] == [fact["id"]]


def test_undoing_an_earlier_deletion_brings_back_no_fact_the_user_declined_since(
    api, say, django_capture_on_commit_callbacks
):
    first = say("My dog is called Biscuit, a beagle.")
    second = say("My dog is called Biscuit, a beagle.")
    question = say("What is my dog called?")
    [fact] = facts(api)
    preview = api.post("/api/deletions/", {"mode": "soft", "select": {"ids": [first["id"]]}}, format="json").json()
    with django_capture_on_commit_callbacks(execute=True):
        earlier = api.post(f"/api/deletions/{preview['id']}/confirm/", {}, format="json").json()
    [again] = facts(api)
    with django_capture_on_commit_callbacks(execute=True):
        decline = api.post(f"/api/facts/{again['id']}/decline/")
    assert decline.status_code == 200 and facts(api) == []

    with django_capture_on_commit_callbacks(execute=True):
        undone = api.post(f"/api/deletions/{earlier['id']}/undo/", {}, format="json")

    # The user's message comes back; the fact they declined since does not, nor what was drawn from it.
    assert undone.status_code == 200, undone.content
    assert facts(api) == []
    live = set(Message.objects.filter(status__in=Message.LIVE).values_list("pk", flat=True))
    assert {first["id"], second["id"], question["id"]} <= live and fact["id"] not in live
    kept = api.get(f"/api/deletions/{earlier['id']}/").json()
    assert kept["status"] == "undone" and "declined since" in kept["outcome"]
    # Undoing the decline itself still brings back the fact it declined.
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/deletions/{decline.json()['id']}/undo/", {}, format="json").status_code == 200
    assert [f["id"] for f in facts(api)] == [again["id"]]


def test_a_declined_fact_goes_and_is_never_drawn_again_from_its_source(api, owner, say):
    source = say("I love hiking in the mountains.")
    [fact] = facts(api)
    response = api.post(f"/api/facts/{fact['id']}/decline/")
    assert response.status_code == 200 and response.json()["status"] in ("executed", "verifying")
    assert facts(api) == []
    assert FactDecline.objects.filter(owner=owner, source_id=source["id"], subject="likes").exists()
    # Read again (a fresh extraction pass from the start): nothing comes back from that message.
    from chat.facts.extract import facts_extract_pass
    from chat.models import FactCursor

    FactCursor.objects.filter(owner=owner).update(seq=0)
    facts_extract_pass(owner_id=owner.pk)
    assert facts(api) == []


def test_a_correction_is_the_users_statement_and_supersedes_the_fact(api, owner, say):
    say("I live in Lisbon.")
    [fact] = facts(api)
    response = api.post(f"/api/facts/{fact['id']}/correct/", {"text": "I live in Sintra, near Lisbon"}, format="json")
    assert response.status_code == 201, response.content
    new = response.json()["fact"]
    assert new["text"] == "Home city: I live in Sintra, near Lisbon." and new["decision"] == "approved"
    assert [f["id"] for f in facts(api, state="current")] == [new["id"]]
    said = Message.objects.get(pk=new["sources"][0]["id"])
    assert said.role == "user" and said.content == "I live in Sintra, near Lisbon"
    assert ContextEdge.objects.filter(source=said, target_id=new["id"], signal="fact").exists()


def test_approve_and_bad_input(api, other_api, say):
    say("I'm allergic to peanuts.")
    [fact] = facts(api)
    assert api.post(f"/api/facts/{fact['id']}/approve/").json()["decision"] == "approved"
    assert other_api.post(f"/api/facts/{fact['id']}/approve/").status_code == 404
    assert other_api.get(f"/api/facts/{fact['id']}/").status_code == 404
    assert api.get("/api/facts/", {"subject": "weather"}).status_code == 400
    assert api.get("/api/facts/", {"state": "gone"}).status_code == 400
    assert api.post(f"/api/facts/{fact['id']}/correct/", {"text": "   "}, format="json").status_code == 400
    assert api.post(f"/api/facts/{fact['id']}/correct/", {"text": 5}, format="json").status_code == 400
    assert api.post(f"/api/facts/{fact['id'] + 999}/decline/").status_code == 404
    assert api.get("/api/facts/progress/").json() == {"pending": 0, "failed": [], "extractor": "rules"}


def test_the_preview_lists_related_information_outside_dep_unticked(api, say):
    paris = say("I live in Paris.")
    seine = say("I usually run along the Seine.")
    say("My favourite food is ramen.")
    preview = api.post("/api/deletions/", {"mode": "soft", "select": {"ids": [paris["id"]]}}, format="json").json()
    related = {item["id"]: item for item in preview["related"]}
    assert seine["id"] in related and related[seine["id"]]["reason"].startswith("similar in meaning")
    assert all(item["id"] not in preview["dependents"] for item in preview["related"])
    # Only the response that creates the preview carries it.
    assert api.get(f"/api/deletions/{preview['id']}/").json()["related"] == []


def test_a_correction_in_the_same_words_of_a_many_valued_fact_keeps_the_users_fact(api, say):
    say("I have a dog named rex.")
    [fact] = facts(api)
    response = api.post(f"/api/facts/{fact['id']}/correct/", {"text": "I have a dog named Rex"}, format="json")
    assert response.status_code == 201
    [kept] = facts(api)
    assert kept["id"] == response.json()["fact"]["id"] != fact["id"]
    assert kept["text"] == "Pets: I have a dog named Rex." and kept["extractor"] == "user"


def test_declining_a_correction_takes_the_correction_message_too(api, owner, say):
    say("I live in Lisbon.")
    [fact] = facts(api)
    new = api.post(f"/api/facts/{fact['id']}/correct/", {"text": "I live in Sintra"}, format="json").json()["fact"]
    correction = new["sources"][0]["id"]
    assert api.post(f"/api/facts/{new['id']}/decline/").status_code == 200
    assert Message.objects.get(pk=correction).status == "deleted"
    # What the user declined is no memory any more: only Lisbon is.
    assert [f["text"] for f in facts(api)] == ["Home city: I live in Lisbon."]
