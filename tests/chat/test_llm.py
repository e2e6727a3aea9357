"""chat/llm.py: the prompt, and the `openai` responder with the real client against a local server."""

import pytest

from chat.llm import ContextItem, OpenAIResponder, build_prompt
from dellm_site.errors import UpstreamFailed

CONTEXT = [ContextItem(id=7, seq=3, role="user", content="I live in Paris.", score=0.8)]


def test_prompt_follows_the_papers_format_with_memories_as_data():
    prompt = build_prompt(CONTEXT, "Where do I live?")
    assert prompt == (
        "Here are past conversations between you and the user:\n"
        '<memories>\n<memory id="3" role="user">\nI live in Paris.\n</memory>\n</memories>\n\n'
        "Reply to the user's query based on past conversation.\n"
        "User query: Where do I live?"
    )


def test_openai_responder_sends_the_context_and_returns_the_reply(openai_server):
    reply = OpenAIResponder().complete(context=CONTEXT, user_message="Where do I live?")
    assert reply == "Paris, as you said."
    [request] = openai_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "fake-model"
    assert request["body"]["messages"][1]["content"] == build_prompt(CONTEXT, "Where do I live?")


def test_openai_responder_streams_tokens(openai_server):
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
def test_openai_responder_maps_faults_to_domain_errors(openai_server, step, transient, message):
    openai_server.script = [step]
    with pytest.raises(UpstreamFailed) as error:
        OpenAIResponder().complete(context=CONTEXT, user_message="Hi")
    assert (error.value.transient, error.value.message) == (transient, message)
