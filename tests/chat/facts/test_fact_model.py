"""The extractor with a configured model, against a local OpenAI-compatible server and the real `openai` client."""

import json
import threading

import pytest
from django.db import connection
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from chat.facts import extract
from chat.facts.extract import facts_extract_pass
from chat.models import Fact, FactCursor, Message
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.erasure.account import account_erase
from tests.factories import make_message
from tests.helpers import wait_for

LISBON = json.dumps({"facts": [{"subject": "home", "statement": "I live in Lisbon."}]})


@pytest.fixture
def model(settings, openai_server):
    settings.DELLM_FACTS_EXTRACTOR = "model"
    return openai_server


def facts(owner) -> list[tuple[str, str]]:
    rows = Message.objects.filter(owner=owner, role="fact", status="active").order_by("pk")
    return [(Fact.objects.get(message_id=m.pk).extractor, m.content) for m in rows]


def test_one_call_per_message_with_a_json_schema_and_the_message_as_data(owner, thread, model):
    model.facts_script = [("ok", LISBON)]
    message = make_message(thread, "Lisbon has been home for years now.")
    facts_extract_pass(owner_id=owner.pk)
    assert facts(owner) == [("model", "Home city: I live in Lisbon.")]
    [request] = model.fact_requests
    body = request["body"]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["properties"]["facts"]["items"]["properties"]["subject"][
        "enum"
    ][:2] == ["name", "home"]
    assert body["messages"][-1] == {"role": "user", "content": message.content}


def test_a_malformed_answer_is_asked_again(owner, thread, model):
    model.facts_script = [("ok", "Sure! Here are the facts: home = Lisbon"), ("ok", LISBON)]
    make_message(thread, "Lisbon has been home for years now.")
    facts_extract_pass(owner_id=owner.pk)
    assert facts(owner) == [("model", "Home city: I live in Lisbon.")]
    assert len(model.fact_requests) == 2


@pytest.mark.parametrize(
    "answers",
    [
        [("ok", "not json"), ("ok", '{"facts": "Lisbon"}')],
        [("ok", json.dumps({"facts": [{"subject": "weather", "statement": "It rains."}]}))] * 2,
        [("ok", json.dumps({"facts": [{"subject": "home", "statement": "x" * 301}]}))] * 2,
        [("status", 500), ("status", 500)],
    ],
    ids=["not-json-then-wrong-shape", "unknown-subject", "too-long", "server-errors"],
)
def test_two_bad_answers_record_a_failure_by_id_and_store_nothing_of_that_message(owner, thread, model, answers):
    model.facts_script = [*answers, ("ok", LISBON)]
    failing = make_message(thread, "Something the model cannot read.")
    make_message(thread, "Lisbon has been home for years now.")
    facts_extract_pass(owner_id=owner.pk)
    # The next message was read as usual; of the failing one, nothing, and its id (never its text) is kept.
    assert facts(owner) == [("model", "Home city: I live in Lisbon.")]
    assert FactCursor.objects.get(owner=owner).failed == [failing.pk]


def test_half_a_good_answer_is_never_stored(owner, thread, model):
    half = {"facts": [{"subject": "home", "statement": "I live in Lisbon."}, {"subject": "pet"}]}
    model.facts_script = [("ok", json.dumps(half))] * 2
    make_message(thread, "Lisbon, and a dog.")
    facts_extract_pass(owner_id=owner.pk)
    assert facts(owner) == []


def test_the_model_budget_bounds_a_pass_and_the_rest_waits(owner, thread, model, monkeypatch):
    # The owner's extraction budget (DELLM_FACTS_MODEL_RATE): each call spends one unit, never the chat's.
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", dict(api_settings.DEFAULT_THROTTLE_RATES, facts="2/min"))
    model.facts_script = [("ok", LISBON)] * 3
    for _ in range(3):
        make_message(thread, "Lisbon has been home for years now.")
    done = facts_extract_pass(owner_id=owner.pk)
    assert done.more and done.wait is not None and len(model.fact_requests) == 2
    assert len(FactCursor.objects.filter(owner=owner)) == 1
    # The third message is still ahead of the cursor: the next pass reads it.
    assert FactCursor.objects.get(owner=owner).seq == Message.objects.filter(owner=owner, role="user")[1].seq


@pytest.mark.parametrize(
    "statement",
    [{"subject": ["home"], "statement": "I live in Lisbon."}, {"subject": "home", "statement": "I live\x00 here."}],
    ids=["subject-not-text", "nul-in-statement"],
)
def test_an_answer_that_cannot_be_stored_is_a_failure_and_the_pass_goes_on(owner, thread, model, statement):
    model.facts_script = [("ok", json.dumps({"facts": [statement]}))] * 2 + [("ok", LISBON)]
    failing = make_message(thread, "Something odd.")
    make_message(thread, "Lisbon has been home for years now.")
    facts_extract_pass(owner_id=owner.pk)
    assert facts(owner) == [("model", "Home city: I live in Lisbon.")]
    assert FactCursor.objects.get(owner=owner).failed == [failing.pk]
    assert FactCursor.objects.get(owner=owner).seq == Message.objects.filter(owner=owner, role="user").last().seq


def test_re_deriving_a_soft_deleted_fact_asks_the_model_nothing(owner, thread, model):
    from chat.facts.rederive import facts_rederive
    from provenance.deletions.confirm import deletion_confirm
    from provenance.deletions.preview import deletion_preview

    model.facts_script = [("ok", LISBON)] * 2
    first = make_message(thread, "Lisbon has been home for years now.")
    make_message(thread, "Still in Lisbon, and loving it.")
    facts_extract_pass(owner_id=owner.pk)
    [fact] = Message.objects.filter(owner=owner, role="fact")
    asked = len(model.fact_requests)
    preview = deletion_preview(owner=owner, actor=owner, ids=[first.pk], mode="soft")
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)  # re-derives (eager)
    assert facts(owner) == [("model", "Home city: I live in Lisbon.")]
    assert len(model.fact_requests) == asked  # every source said it: the survivor's statement is the fact's text
    # Asked again for the same removed fact (a redelivered task): nothing more is stored.
    assert facts_rederive(owner_id=owner.pk, fact_ids=[fact.pk]) == []


def test_one_pass_at_a_time_and_the_one_asked_for_meanwhile_runs_after(owner, thread):
    from django.core.cache import cache

    make_message(thread, "I live in Lisbon.")
    cache.add(f"facts:pass:{owner.pk}", 1)  # a pass of this owner is running elsewhere
    assert facts_extract_pass(owner_id=owner.pk).busy and facts(owner) == []
    cache.delete(f"facts:pass:{owner.pk}")
    done = facts_extract_pass(owner_id=owner.pk)
    # The running pass ends saying there is more: the task enqueues the next, which reads what came meanwhile.
    assert done.more and facts(owner) == [("rules", "Home city: I live in Lisbon.")]


class Running:
    """A facts pass in its own thread (its own database connection), as the worker runs it."""

    def __init__(self, owner_id: int):
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(owner_id,))
        self.thread.start()

    def _run(self, owner_id: int) -> None:
        try:
            facts_extract_pass(owner_id=owner_id)
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()

    def join(self) -> None:
        self.thread.join(30)
        assert not self.thread.is_alive() and self.error is None, self.error


def sent(model) -> list[str]:
    return [request["body"]["messages"][-1]["content"] for request in model.fact_requests]


@pytest.mark.django_db(transaction=True)
def test_a_message_purged_while_a_pass_holds_a_model_call_is_never_sent(owner, thread, model):
    make_message(thread, "Lisbon has been home for years now.")
    secret = make_message(thread, "My passport number is X123-SECRET and I live in Porto.")
    model.gate = threading.Event()  # the model holds the first call
    running = Running(owner.pk)
    wait_for(lambda: len(model.fact_requests) == 1)
    deletion = deletion_preview(owner=owner, actor=owner, ids=[secret.pk], mode="purge")
    deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)
    model.gate.set()
    running.join()
    assert sent(model) == ["Lisbon has been home for years now."]
    # The pass read past it: the cursor is at the end, and nothing of it was stored.
    assert FactCursor.objects.get(owner=owner).seq == secret.seq
    assert not Message.objects.filter(owner=owner, content__contains="X123").exists()


@pytest.mark.django_db(transaction=True)
def test_an_account_erased_while_a_pass_holds_a_model_call_sends_nothing_more(owner, thread, model):
    make_message(thread, "Lisbon has been home for years now.")
    for n in range(3):
        make_message(thread, f"My sister number {n} lives in Porto.")
    model.gate = threading.Event()
    running = Running(owner.pk)
    wait_for(lambda: len(model.fact_requests) == 1)
    account_erase(owner=owner, actor=owner, confirm=owner.get_username())
    model.gate.set()
    running.join()
    assert sent(model) == ["Lisbon has been home for years now."]
    assert not Message.objects.filter(owner_id=owner.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_pass_longer_than_its_lock_keeps_it_and_no_second_pass_reads_the_same_messages(
    owner, thread, model, monkeypatch
):
    monkeypatch.setattr(extract, "PASS_LOCK_SECONDS", 1)
    model.facts_script = [("sleep", 0.6)] * 4  # each call takes 0.6 s: the pass outlives the lock's first second
    for n in range(4):
        make_message(thread, f"My friend number {n} lives in Porto.")
    running = Running(owner.pk)
    wait_for(lambda: len(model.fact_requests) == 3, timeout=10)
    assert facts_extract_pass(owner_id=owner.pk).busy
    running.join()
    assert len(model.fact_requests) == 4
