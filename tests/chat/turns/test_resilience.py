"""Holding up under database trouble: task retries, the stuck-turn sweep, 503 on a saturated pool."""

import threading
from datetime import timedelta

import pytest
from django.db import OperationalError, connection, connections
from django.test import Client
from django.utils import timezone

from chat.models import Turn
from chat.turns.recovery import turns_stuck_sweep
from chat.turns.run import turn_run
from chat.turns.start import turn_create
from chat.turns.tasks import turn_run_task
from core.auth.tokens import token_create


def _stale(turn: Turn, *, status: str, attempts: int) -> None:
    Turn.objects.filter(pk=turn.pk).update(
        status=status, attempts=attempts, updated_at=timezone.now() - timedelta(hours=1)
    )


def test_sweep_reruns_a_stuck_turn_and_fails_one_past_its_attempts(db, thread, settings):
    settings.DELLM_TURN_MAX_ATTEMPTS = 3
    lost = turn_create(thread=thread, content="My cat is called Miso.", enqueue=False)
    hopeless = turn_create(thread=thread, content="And my dog is Pip.", enqueue=False)
    fresh = turn_create(thread=thread, content="Still coming.", enqueue=False)
    _stale(lost, status=Turn.Status.RUNNING, attempts=1)
    _stale(hopeless, status=Turn.Status.RUNNING, attempts=3)

    swept = turns_stuck_sweep()

    assert swept == {"rerun": [lost.pk], "failed": [hopeless.pk]}
    lost.refresh_from_db()
    hopeless.refresh_from_db()
    fresh.refresh_from_db()
    # Tasks run eagerly here: the re-enqueued turn ran to its reply.
    assert (lost.status, lost.attempts, lost.reply is not None) == (Turn.Status.DONE, 2, True)
    assert (hopeless.status, hopeless.error) == (
        Turn.Status.FAILED,
        "The reply could not be generated after 3 attempts; please retry.",
    )
    assert (fresh.status, fresh.attempts) == (Turn.Status.PENDING, 0)
    assert turns_stuck_sweep() == {"rerun": [], "failed": []}


def test_turn_task_is_retried_after_a_transient_database_error(db, thread, monkeypatch, settings):
    settings.DELLM_DB_RETRY_BACKOFF = 0.01
    turn = turn_create(thread=thread, content="Remember that I like tea.", enqueue=False)
    real = turn_run
    calls = []

    def flaky(**kwargs):
        calls.append(kwargs["turn_id"])
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(**kwargs)

    monkeypatch.setattr("chat.turns.run.turn_run", flaky)
    turn_run_task.delay(turn_id=turn.pk, owner_id=turn.owner_id)

    turn.refresh_from_db()
    assert calls == [turn.pk, turn.pk]
    assert (turn.status, turn.error) == (Turn.Status.DONE, "")


def test_a_reply_commits_once_when_two_runs_race(db, thread):
    turn = turn_create(thread=thread, content="Two workers got me.", enqueue=False)
    first = turn_run(turn_id=turn.pk, owner_id=turn.owner_id)
    # A second run of the same turn (redelivered, or re-run by the sweep) that started before the first committed.
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING)
    turn_run(
        turn_id=turn.pk,
        owner_id=turn.owner_id,
        on_running=lambda: Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.DONE),
    )

    assert thread.messages.filter(role="assistant").count() == 1
    assert Turn.objects.get(pk=turn.pk).reply_id == first.reply_id


@pytest.fixture
def pool_of_one():
    """The default alias on a pool of one connection that waits 0.5 s; restored afterwards."""
    wrapper = connections["default"]
    options = wrapper.settings_dict["OPTIONS"]
    previous = options.get("pool")
    wrapper.close()
    wrapper.close_pool()
    options["pool"] = {"min_size": 0, "max_size": 1, "timeout": 0.5}
    yield
    wrapper.close()
    wrapper.close_pool()
    if previous is None:
        options.pop("pool")
    else:
        options["pool"] = previous


def _get_in_another_thread(path: str, client: Client | None = None, **headers: str):
    """A request on its own thread, hence its own connection from the pool."""
    result = {}

    def run() -> None:
        try:
            result["response"] = (client or Client(raise_request_exception=False)).get(path, headers=headers)
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(30)
    return result["response"]


@pytest.mark.skipif(
    "pool" not in connections["default"].settings_dict["OPTIONS"], reason="the database pool is off (DELLM_DB_POOL)"
)
def test_a_saturated_pool_answers_503_with_retry_after(transactional_db, owner, pool_of_one):
    token = token_create(user=owner)[1]
    browser = Client(raise_request_exception=False)
    browser.force_login(owner)
    connection.ensure_connection()  # this thread now holds the pool's only connection

    api = _get_in_another_thread("/api/threads/", Authorization=f"Token {token}")
    page = _get_in_another_thread("/", client=browser)
    connection.close()  # handed back: the next request gets it
    ok = _get_in_another_thread("/api/threads/", Authorization=f"Token {token}")

    assert (api.status_code, api["Retry-After"]) == (503, "5")
    assert api.json() == {
        "error": {
            "code": "service_unavailable",
            "message": "The database is busy; please try again in a few seconds.",
            "fields": {},
        }
    }
    assert ok.status_code == 200
    assert (page.status_code, page["Retry-After"], page.content) == (
        503,
        "5",
        b"The database is busy; please try again in a few seconds.",
    )
