import pytest

from chat.models import Message, Turn
from chat.turns.recovery import turn_retry
from chat.turns.start import turn_create
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from tests.fake_openai import FakeOpenAI
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake_llm(start_worker):
    with FakeOpenAI(default_text="Hello from the fake model.") as fake:
        start_worker(
            {
                "DELLM_LLM": "openai",
                "OPENAI_BASE_URL": fake.url,
                "OPENAI_API_KEY": "test-key",
                "DELLM_CHAT_MODEL": "fake-model",
                "DELLM_LLM_TIMEOUT": "1",
                "DELLM_RETRY_BACKOFF": "0.05",
                "DELLM_LLM_MAX_RETRIES": "3",
            }
        )
        yield fake


def run(thread, text: str) -> Turn:
    turn = turn_create(thread=thread, content=text)
    return wait_for(lambda: Turn.objects.exclude(status__in=["pending", "running"]).filter(pk=turn.pk).first())


def test_transient_faults_are_retried_until_success(fake_llm, thread):
    fake_llm.script = [("status", 429), ("status", 500), ("sleep", 3)]
    turn = run(thread, "Tell me something nice.")
    assert (turn.status, turn.reply.content, turn.attempts) == ("done", "Hello from the fake model.", 4)
    assert len(fake_llm.requests) == 4
    assert fake_llm.requests[-1]["body"]["model"] == "fake-model"


def test_persistent_fault_fails_the_turn_clearly_and_keeps_the_message(fake_llm, thread):
    fake_llm.script = [("status", 503)] * 4
    turn = run(thread, "Are you there?")
    assert (turn.status, turn.error, turn.reply) == ("failed", "The language model answered HTTP 503.", None)
    assert turn.user_message.status == "active"
    assert len(fake_llm.requests) == 4

    turn_retry(turn_id=turn.pk, owner_id=turn.owner_id)
    turn = wait_for(lambda: Turn.objects.filter(pk=turn.pk, status__in=["done", "failed"]).first())
    assert (turn.status, turn.error) == ("done", "")


def test_client_error_is_not_retried(fake_llm, thread):
    fake_llm.script = [("status", 400)]
    turn = run(thread, "Hello?")
    assert (turn.status, turn.error) == ("failed", "The language model answered HTTP 400.")
    assert len(fake_llm.requests) == 1


def test_deleted_message_never_reaches_the_model_again(fake_llm, owner, thread):
    run(thread, "My bank PIN is 2468.")
    run(thread, "What is my bank PIN?")
    assert "2468" in fake_llm.requests[-1]["body"]["messages"][-1]["content"]
    preview = deletion_preview(owner=owner, actor=owner, exact="2468", mode="purge")
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    assert not Message.objects.filter(owner=owner, content__contains="2468").exists()
    fake_llm.requests.clear()
    run(thread, "What is my bank PIN?")
    assert "2468" not in repr(fake_llm.requests)
