"""The relay from the worker's turn events to OpenAI chunks (assistant/openai/relay.py), event by event."""

import json

from assistant.openai.relay import Outcome, Prepared, Relay
from assistant.openai.transcript import Said
from assistant.openai.wire import CompletionRequest


def relay(include_usage: bool = False) -> Relay:
    request = CompletionRequest(
        model="dellm",
        system="",
        conversation=[Said(role="user", text="Hi")],
        stream=True,
        include_usage=include_usage,
        thread_id=None,
    )
    return Relay(Prepared(request=request, owner_id=1, turn_id=7, thread_id=3, message_id=5, dellm={"turn_id": 7}))


def contents(parts: list[str]) -> list[str | None]:
    out = []
    for part in parts:
        if part.startswith("data: {"):
            body = json.loads(part.removeprefix("data: "))
            out += [c["delta"].get("content") for c in body.get("choices", [])]
    return out


def done(text: str) -> Outcome:
    return Outcome(done=True, text=text, reply_id=9, context=(2,), context_seqs=(1,), prompt_chars=8)


def test_tokens_then_the_reply_then_done():
    r = relay()
    parts = r.start()
    for word in ("Hello ", "there."):
        parts += r.event({"event": "token", "data": {"text": word}})[0]
    assert r.event({"event": "changed", "data": {}}) == ([], True)
    parts += r.finish(done("Hello there."))
    assert contents(parts) == ["", "Hello ", "there.", None]
    assert parts[-1] == "data: [DONE]\n\n"
    final = json.loads(parts[-2].removeprefix("data: "))
    assert final["dellm"] == {"turn_id": 7, "reply_id": 9, "context": [2], "context_seqs": [1], "facts": []}


def test_missed_tokens_are_sent_before_the_end():
    r = relay()
    parts = r.start() + r.event({"event": "token", "data": {"text": "Hello "}})[0] + r.finish(done("Hello there."))
    assert contents(parts) == ["", "Hello ", "there.", None]


def test_a_reset_says_so_and_then_carries_the_new_reply():
    r = relay()
    parts = r.start() + r.event({"event": "token", "data": {"text": "Old "}})[0]
    parts += r.event({"event": "reset", "data": {}})[0]
    parts += r.event({"event": "token", "data": {"text": "New "}})[0]
    parts += r.finish(done("New reply."))
    assert contents(parts) == ["", "Old ", Relay.RESET_NOTE, "New ", "reply.", None]


def test_a_reply_unlike_what_streamed_is_sent_whole_after_the_note():
    r = relay()
    parts = r.start() + r.event({"event": "token", "data": {"text": "Draft"}})[0] + r.finish(done("Final."))
    assert contents(parts) == ["", "Draft", Relay.RESET_NOTE, "Final.", None]


def test_a_failed_turn_ends_the_stream_with_an_openai_error():
    [part] = relay().finish(Outcome(done=False, error="The language model answered HTTP 503."))
    assert json.loads(part.removeprefix("data: ")) == {
        "error": {
            "message": "The language model answered HTTP 503.",
            "type": "server_error",
            "param": None,
            "code": "upstream_error",
        }
    }


def test_usage_is_null_on_every_chunk_until_the_usage_chunk():
    r = relay(include_usage=True)
    parts = r.start() + r.event({"event": "token", "data": {"text": "Hi."}})[0] + r.finish(done("Hi."))
    bodies = [json.loads(p.removeprefix("data: ")) for p in parts[:-1]]
    assert [b["usage"] for b in bodies[:-1]] == [None, None, None]
    assert bodies[-1]["choices"] == []
    assert bodies[-1]["usage"] == {"prompt_tokens": 2, "completion_tokens": 1, "total_tokens": 3}


def test_a_tool_call_streams_as_openai_streams_it_in_fragments_then_finish_reason_tool_calls():
    arguments = '{"city": "Grenoble", "days": 3}'
    outcome = Outcome(
        done=True, text="", reply_id=9, tool_calls=({"id": "c1", "name": "get_weather", "arguments": arguments},)
    )
    stream = relay()
    parts = stream.start() + stream.finish(outcome)
    bodies = [json.loads(p.removeprefix("data: ")) for p in parts if p.startswith("data: {")]
    deltas = [b["choices"][0]["delta"] for b in bodies]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[1] == {
        "tool_calls": [
            {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        ]
    }
    fragments = [d["tool_calls"][0]["function"]["arguments"] for d in deltas[2:-1]]
    assert fragments == [arguments[:16], arguments[16:]]
    assert all(
        d["tool_calls"][0] == {"index": 0, "function": {"arguments": f}}
        for d, f in zip(deltas[2:-1], fragments, strict=True)
    )
    assert [b["choices"][0]["finish_reason"] for b in bodies] == [None] * (len(bodies) - 1) + ["tool_calls"]
    assert parts[-1] == "data: [DONE]\n\n"
