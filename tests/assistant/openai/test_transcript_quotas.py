"""/v1's transcript against the quotas, as the official `openai` client sees it (chat/quotas.py).

Refused before any turn is queued, so no worker is needed: `live_server`
serves the request and the client parses the error.
"""

from datetime import timedelta

import openai
import pytest
from django.utils import timezone

from chat.models import Message, Turn
from core.auth.tokens import token_create
from tests.factories import make_message, make_thread

pytestmark = pytest.mark.django_db(transaction=True)


def _client(live_server, owner) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=token_create(user=owner)[1], max_retries=0)


def _transcript(owner, new: int) -> tuple[int, list[dict]]:
    thread = make_thread(owner)
    said = [{"role": "user", "content": "I keep bees."}, {"role": "assistant", "content": "Bees, noted."}]
    for message in said:
        make_message(thread, message["content"], role=message["role"])
    extra = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"elsewhere {i}"} for i in range(new)]
    return thread.pk, [*said, *extra, {"role": "user", "content": "And now?"}]


def test_the_client_gets_413_for_a_transcript_larger_than_a_request_may_store(live_server, owner, settings):
    settings.DELLM_COMPLETION_MAX_NEW_MESSAGES = 10
    thread_id, messages = _transcript(owner, 11)
    with _client(live_server, owner) as client, pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(
            model="dellm", messages=messages, extra_headers={"X-DeLLM-Thread": str(thread_id)}
        )
    assert refused.value.status_code == 413
    assert (refused.value.code, refused.value.param, refused.value.type) == (
        "quota_exceeded",
        "messages",
        "invalid_request_error",
    )
    assert (Message.objects.filter(owner=owner).count(), Turn.objects.count()) == (2, 0)


def test_the_client_gets_a_rate_limit_error_with_retry_after_past_the_days_quota(live_server, owner, settings):
    settings.DELLM_QUOTA_MESSAGES_PER_DAY = 5
    thread_id, messages = _transcript(owner, 4)
    Message.objects.filter(owner=owner).update(created_at=timezone.now() - timedelta(hours=3))
    with _client(live_server, owner) as client, pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(
            model="dellm", messages=messages, extra_headers={"X-DeLLM-Thread": str(thread_id)}
        )
    assert refused.value.response.headers["retry-after"] == str(21 * 3600)
    assert (refused.value.code, refused.value.type) == ("quota_exceeded", "insufficient_quota")
    assert (Message.objects.filter(owner=owner).count(), Turn.objects.count()) == (2, 0)
