"""The `openai` backends, exercised with the real client against a local server."""

import pytest

from chat.embeddings import OpenAIEmbedder
from chat.llm import ContextItem, OpenAIResponder, build_prompt
from dellm_site.errors import UpstreamFailed
from tests.fake_openai import FakeOpenAI, _embeddings


@pytest.fixture
def fake(settings):
    with FakeOpenAI(default_text="Paris, as you said.") as server:
        settings.OPENAI_BASE_URL = server.url
        settings.OPENAI_API_KEY = "test-key"
        settings.DELLM_CHAT_MODEL = "fake-model"
        settings.DELLM_LLM_TIMEOUT = 1
        yield server


CONTEXT = [ContextItem(id=7, seq=3, role="user", content="I live in Paris.", score=0.8)]


def test_prompt_follows_the_papers_format_with_memories_as_data():
    prompt = build_prompt(CONTEXT, "Where do I live?")
    assert prompt == (
        "Here are past conversations between you and the user:\n"
        '<memories>\n<memory id="3" role="user">\nI live in Paris.\n</memory>\n</memories>\n\n'
        "Reply to the user's query based on past conversation.\n"
        "User query: Where do I live?"
    )


def test_openai_responder_sends_the_context_and_returns_the_reply(fake):
    reply = OpenAIResponder().complete(context=CONTEXT, user_message="Where do I live?")
    assert reply == "Paris, as you said."
    [request] = fake.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "fake-model"
    assert request["body"]["messages"][1]["content"] == build_prompt(CONTEXT, "Where do I live?")


def test_openai_responder_streams_tokens(fake):
    tokens = list(OpenAIResponder().stream(context=CONTEXT, user_message="Where do I live?"))
    assert "".join(tokens) == "Paris, as you said."
    assert len(tokens) == 4


@pytest.mark.parametrize(
    ("step", "transient", "message"),
    [
        (("status", 429), True, "The language model is rate-limiting us (HTTP 429)."),
        (("status", 502), True, "The language model answered HTTP 502."),
        (("status", 401), False, "The language model answered HTTP 401."),
        (("sleep", 2), True, "The language model timed out."),
    ],
)
def test_openai_responder_maps_faults_to_domain_errors(fake, step, transient, message):
    fake.script = [step]
    with pytest.raises(UpstreamFailed) as error:
        OpenAIResponder().complete(context=CONTEXT, user_message="Hi")
    assert (error.value.transient, error.value.message) == (transient, message)


def test_openai_embedder_returns_vectors_in_input_order(fake):
    vectors = OpenAIEmbedder(model="text-embedding-3-small", dim=8).embed(["a", "bbb"])
    assert vectors == [item["embedding"] for item in _embeddings(["a", "bbb"], 8)["data"][::-1]]
    body = fake.requests[0]["body"]
    assert (fake.requests[0]["path"], body["model"], body["input"]) == (
        "/v1/embeddings",
        "text-embedding-3-small",
        ["a", "bbb"],
    )


def test_openai_embedder_refuses_a_dimension_the_database_cannot_store(fake):
    with pytest.raises(UpstreamFailed, match="returned 8-d vectors; the database stores 1536-d"):
        OpenAIEmbedder(model="text-embedding-3-small", dim=1536).embed(["a"])


def test_openai_embedder_marks_rate_limits_transient(fake):
    fake.script = [("status", 429)]
    with pytest.raises(UpstreamFailed) as error:
        OpenAIEmbedder(model="text-embedding-3-small", dim=8).embed(["a"])
    assert error.value.transient
