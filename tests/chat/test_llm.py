"""chat/llm.py: the prompt, and the `openai` responder with the real client against a local server."""

import pytest

from chat.llm import Answer, ContextItem, OfflineResponder, OpenAIResponder, ToolOffer, ToolStep, build_prompt
from core.errors import UpstreamFailed

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


WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_the_offline_responder_never_calls_a_tool_it_answers_in_text():
    offer = ToolOffer(tools=WEATHER, choice="required", parallel=True)
    answer = OfflineResponder().answer(context=CONTEXT, user_message="Where do I live?", offer=offer)
    plain = OfflineResponder().complete(context=CONTEXT, user_message="Where do I live?")
    assert answer == Answer(text=plain, tool_calls=[])
    tokens: list[str] = []
    streamed = OfflineResponder().answer(
        context=CONTEXT, user_message="Where do I live?", offer=offer, on_token=tokens.append
    )
    assert (streamed, "".join(tokens)) == (Answer(text=plain), plain)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responder_offers_the_tools_and_gathers_the_calls(openai_server, stream):
    openai_server.script = [("tools", [("call_1", "get_weather", '{"city": "Paris, France"}')])]
    tokens: list[str] = []
    answer = OpenAIResponder().answer(
        context=CONTEXT,
        user_message="Weather?",
        offer=ToolOffer(tools=WEATHER, choice="auto", parallel=False),
        on_token=tokens.append if stream else None,
    )
    assert answer == Answer(
        text="", tool_calls=[{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris, France"}'}]
    )
    body = openai_server.requests[-1]["body"]
    assert (body["tools"], body["tool_choice"], body["parallel_tool_calls"]) == (WEATHER, "auto", False)


def test_openai_responder_shows_the_model_its_calls_and_the_results(openai_server):
    step = ToolStep(text="", calls=[{"id": "c1", "name": "get_weather", "arguments": "{}"}], results=[("c1", "Sunny")])
    answer = OpenAIResponder().answer(context=CONTEXT, user_message="Weather?", steps=[step])
    assert answer == Answer(text="Paris, as you said.")
    messages = openai_server.requests[-1]["body"]["messages"]
    assert messages[2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
    ]
    assert "tools" not in openai_server.requests[-1]["body"]
