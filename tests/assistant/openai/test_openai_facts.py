"""`/v1` with facts on, driven by the official `openai` client: the `dellm` field names each fact's sources."""

import openai
import pytest

from chat.facts.extract import facts_extract_pass
from chat.models import Message
from core.auth.tokens import token_create
from tests.factories import make_message
from tests.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_completion_names_the_sources_of_each_fact_it_used(start_worker, live_server, owner, thread):
    said = make_message(thread, "I live in Lisbon near the river.")
    facts_extract_pass(owner_id=owner.pk)
    fact = Message.objects.get(owner=owner, role="fact")
    with FakeOpenAI(default_text="Lisbon.") as fake:
        env = {"DELLM_LLM": "openai", "OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "k"}
        start_worker(env | {"DELLM_FACTS_EXTRACTOR": "rules"})
        token = token_create(user=owner)[1]
        with openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=token, max_retries=0) as client:
            answer = client.chat.completions.create(
                model="dellm", messages=[{"role": "user", "content": "Which home city do I live in?"}]
            )
    dellm = answer.model_extra["dellm"]
    assert dellm["context"][0] == fact.pk
    assert dellm["facts"] == [{"id": fact.pk, "sources": [said.pk]}]
