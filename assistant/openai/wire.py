"""The OpenAI wire format of `/v1/`: request validation, completion objects, chunks and errors.

Field names follow OpenAI's chat completions API. DeLLM adds one field, `dellm`,
on a completion and on the last chunk of a stream (docs: "OpenAI-compatible
endpoint"). Validation is OpenAI's: unknown fields are ignored, what DeLLM
cannot honour (several choices, legacy `functions`, images, audio, structured
output) is a 400 naming the parameter, never silently dropped. Tools
(`tools`, `tool_choice`, `parallel_tool_calls`, assistant `tool_calls` and
`role: "tool"` results) are checked as strictly as OpenAI checks them
(docs/OPENAI.md, "Tool calls").
"""

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from assistant.openai.transcript import Said, ToolCall
from chat.llm import ToolOffer
from chat.models import MAX_TOOL_CALL_ID, MAX_TOOL_CALLS, TOOL_NAME
from core.api.client_input import unstorable, whole_number
from core.streams.slots import StreamRefused
from core.streams.sse import EventStreamRenderer

# Roles whose text is an instruction, not conversation: joined into one stored system prompt (never memory).
SYSTEM_ROLES = ("system", "developer")
CONVERSATION_ROLES = ("user", "assistant")
# A transcript longer than this is refused (each request is aligned in full).
MAX_MESSAGES = 1000
# Parameters that ask for something DeLLM does not do; a non-empty value is refused.
UNSUPPORTED = {
    "functions": "The legacy 'functions' parameter is not supported by DeLLM: send 'tools'.",
    "function_call": "The legacy 'function_call' parameter is not supported by DeLLM: send 'tool_choice'.",
    "audio": "Audio output is not supported by DeLLM.",
    "prediction": "Predicted outputs are not supported by DeLLM.",
}


class CompletionError(Exception):
    """An OpenAI-format error: `{"error": {"message", "type", "param", "code"}}` with an HTTP status."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def stream_refusal(refused: StreamRefused) -> CompletionError:
    """The kit's one stream refusal in OpenAI's words: 429 `rate_limit_exceeded`, or 503 `service_unavailable`."""
    if refused.status == 429:
        kind, code = "requests", "rate_limit_exceeded"
    else:
        kind, code = "server_error", "service_unavailable"
    return CompletionError(
        refused.message,
        status=refused.status,
        type=kind,
        code=code,
        headers={"Retry-After": str(refused.retry_after)},
    )


TOOL_CHOICES = ("none", "auto", "required")


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    system: str
    conversation: list[Said]
    stream: bool
    include_usage: bool
    thread_id: int | None
    # The client's tools, passed upstream for this turn only (chat/turns/tool_offers.py); None: none offered.
    tools: ToolOffer | None = None


def model_ids() -> list[str]:
    return [settings.DELLM_OPENAI_MODEL]


def _text(content: object, param: str, role: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for index, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise CompletionError("Each content part must be an object with a type.", param=f"{param}[{index}]")
            if part["type"] != "text":
                raise CompletionError(
                    f"Content parts of type '{part['type']}' are not supported by DeLLM: send text only.",
                    param=f"{param}[{index}].type",
                    code="unsupported_content_type",
                )
            if not isinstance(part.get("text"), str):
                raise CompletionError("A text part needs a string 'text'.", param=f"{param}[{index}].text")
            parts.append(part["text"])
        return "\n".join(parts)
    if content is None and role == "assistant":
        return ""
    raise CompletionError("'content' must be a string or a list of text parts.", param=param)


def _storable(text: str, param: str) -> None:
    """Refuse what PostgreSQL cannot store as text (as the REST API's serializers do): NUL and lone surrogates."""
    problem = unstorable(text)
    if problem is not None:
        raise CompletionError(problem, param=param, code="invalid_value")


def _thread_id(raw: object, param: str) -> int | None:
    if raw is None or raw == "":
        return None
    thread_id = whole_number(str(raw).strip(), digits=18)
    if thread_id is None:
        raise CompletionError("A DeLLM thread key is a thread id (a whole number).", param=param)
    return thread_id


def _tools(body: dict) -> ToolOffer | None:
    """`tools`, `tool_choice` and `parallel_tool_calls`, validated as OpenAI does; None when no tool is offered."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise CompletionError("'parallel_tool_calls' must be a boolean.", param="parallel_tool_calls")
    if tools is None or tools == []:
        if choice not in (None, "none"):
            raise CompletionError("'tool_choice' is only allowed when 'tools' are specified.", param="tool_choice")
        return None
    if not isinstance(tools, list):
        raise CompletionError("'tools' must be an array of tool objects.", param="tools")
    if len(tools) > MAX_TOOL_CALLS:
        raise CompletionError(
            f"At most {MAX_TOOL_CALLS} tools per request.", param="tools", code="array_above_max_length"
        )
    names: list[str] = []
    for index, tool in enumerate(tools):
        param = f"tools[{index}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise CompletionError("Each tool must be an object with type 'function'.", param=f"{param}.type")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise CompletionError("A function tool needs a 'function' object.", param=f"{param}.function")
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise CompletionError(
                "A function's name is 1 to 64 letters, digits, underscores or dashes.",
                param=f"{param}.function.name",
                code="invalid_value",
            )
        if name in names:
            raise CompletionError(f"Duplicate function name {name!r}.", param=f"{param}.function.name")
        names.append(name)
        if "description" in function and not isinstance(function["description"], str):
            raise CompletionError("A function's description must be a string.", param=f"{param}.function.description")
        if "parameters" in function and not isinstance(function["parameters"], dict):
            raise CompletionError(
                "A function's parameters must be a JSON Schema object.", param=f"{param}.function.parameters"
            )
        if "strict" in function and not isinstance(function["strict"], bool | None):
            raise CompletionError("'strict' must be a boolean.", param=f"{param}.function.strict")
    if isinstance(choice, dict):
        function = choice.get("function")
        named = function.get("name") if isinstance(function, dict) else None
        if choice.get("type") != "function" or not isinstance(named, str):
            raise CompletionError(
                '\'tool_choice\' must be none, auto, required or {"type": "function", "function": {"name": ...}}.',
                param="tool_choice",
            )
        if named not in names:
            raise CompletionError(f"'tool_choice' names {named!r}, which is not in 'tools'.", param="tool_choice")
    elif choice is not None and choice not in TOOL_CHOICES:
        raise CompletionError(
            "'tool_choice' must be none, auto, required or an object naming a function.", param="tool_choice"
        )
    return ToolOffer(tools=tools, choice=choice, parallel=parallel)


def _tool_calls(raw: object, param: str) -> tuple[ToolCall, ...]:
    """An assistant message's `tool_calls`: [{"id", "type": "function", "function": {"name", "arguments"}}]."""
    if not isinstance(raw, list) or not raw:
        raise CompletionError("'tool_calls' must be a non-empty array.", param=param)
    calls: list[ToolCall] = []
    for index, call in enumerate(raw):
        at = f"{param}[{index}]"
        if not isinstance(call, dict) or call.get("type", "function") != "function":
            raise CompletionError("Each tool call must be an object with type 'function'.", param=f"{at}.type")
        call_id, function = call.get("id"), call.get("function")
        if not isinstance(call_id, str) or not call_id or len(call_id) > MAX_TOOL_CALL_ID:
            raise CompletionError(f"A tool call needs an 'id' of 1 to {MAX_TOOL_CALL_ID} characters.", param=f"{at}.id")
        if not isinstance(function, dict):
            raise CompletionError("A tool call needs a 'function' object.", param=f"{at}.function")
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise CompletionError(
                "A function's name is 1 to 64 letters, digits, underscores or dashes.", param=f"{at}.function.name"
            )
        if not isinstance(arguments, str):
            raise CompletionError(
                "A tool call's 'arguments' must be a string (JSON).", param=f"{at}.function.arguments"
            )
        for value, where in ((call_id, f"{at}.id"), (arguments, f"{at}.function.arguments")):
            _storable(value, where)
        if any(known.id == call_id for known in calls):
            raise CompletionError(f"Duplicate tool call id {call_id!r}.", param=f"{at}.id")
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    if sum(len(call.arguments) for call in calls) > settings.DELLM_MAX_MESSAGE_CHARS:
        raise CompletionError(
            f"A message's tool call arguments have at most {settings.DELLM_MAX_MESSAGE_CHARS} characters.",
            param=param,
            code="string_above_max_length",
        )
    return tuple(calls)


def _tool_order(conversation: list[Said], indexes: list[int]) -> None:
    """OpenAI's rule: a `tool` message answers a call of the assistant message just before the tool messages,
    each call is answered once, and every call is answered before the conversation goes on."""
    open_calls: list[str] = []
    answered: set[str] = set()
    for said, index in zip(conversation, indexes, strict=True):
        if said.role == "tool":
            if said.tool_call_id not in open_calls or said.tool_call_id in answered:
                raise CompletionError(
                    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls' "
                    "(one per 'tool_call_id').",
                    param=f"messages[{index}].tool_call_id",
                )
            answered.add(said.tool_call_id)
            continue
        missing = [call for call in open_calls if call not in answered]
        if missing:
            raise CompletionError(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}",
                param=f"messages[{index}].role",
            )
        open_calls = [call.id for call in said.tool_calls]
        answered = set()
    missing = [call for call in open_calls if call not in answered]
    if missing:
        raise CompletionError(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}",
            param="messages",
        )


def completion_request_parse(body: object, *, thread_header: str | None) -> CompletionRequest:
    """Validate a chat completion request the way OpenAI does; raise CompletionError (400/404)."""
    if not isinstance(body, dict):
        raise CompletionError("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise CompletionError("You must provide a model parameter.", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise CompletionError("'messages' must be a non-empty array.", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise CompletionError(f"At most {MAX_MESSAGES} messages per request.", param="messages")
    n = body.get("n")
    if n is not None and n != 1:
        raise CompletionError("DeLLM returns one choice: 'n' must be 1.", param="n")
    for name, message in UNSUPPORTED.items():
        if body.get(name) not in (None, [], {}, "none"):
            raise CompletionError(message, param=name, code="unsupported_parameter")
    response_format = body.get("response_format")
    if response_format is not None and (not isinstance(response_format, dict) or response_format.get("type") != "text"):
        raise CompletionError("Only text responses are supported by DeLLM.", param="response_format")
    if body.get("modalities") not in (None, ["text"]):
        raise CompletionError("Only text responses are supported by DeLLM.", param="modalities")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise CompletionError("'stream' must be a boolean.", param="stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise CompletionError("'stream_options' must be an object.", param="stream_options")
    if options is not None and not stream:
        raise CompletionError("'stream_options' is only allowed when 'stream' is true.", param="stream_options")
    include_usage = bool((options or {}).get("include_usage", False))
    tools = _tools(body)
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise CompletionError("'metadata' must be an object.", param="metadata")

    system: list[str] = []
    conversation: list[Said] = []
    # Each conversation message's index in `messages` (for the param of an error).
    indexes: list[int] = []
    for index, message in enumerate(messages):
        param = f"messages[{index}]"
        if not isinstance(message, dict):
            raise CompletionError("Each message must be an object with a role and content.", param=param)
        role = message.get("role")
        if role == "function" or message.get("function_call"):
            raise CompletionError(UNSUPPORTED["functions"], param=f"{param}.role", code="unsupported_parameter")
        if role not in (*SYSTEM_ROLES, *CONVERSATION_ROLES, "tool"):
            raise CompletionError(
                f"Invalid role {role!r}: expected one of system, developer, user, assistant, tool.",
                param=f"{param}.role",
            )
        calls: tuple[ToolCall, ...] = ()
        if message.get("tool_calls") is not None:
            if role != "assistant":
                raise CompletionError("Only an assistant message has 'tool_calls'.", param=f"{param}.tool_calls")
            calls = _tool_calls(message["tool_calls"], f"{param}.tool_calls")
        call_id = ""
        if role == "tool":
            call_id = message.get("tool_call_id")  # type: ignore[assignment]
            if not isinstance(call_id, str) or not call_id or len(call_id) > MAX_TOOL_CALL_ID:
                raise CompletionError(
                    f"A tool message needs a 'tool_call_id' of 1 to {MAX_TOOL_CALL_ID} characters.",
                    param=f"{param}.tool_call_id",
                )
            _storable(call_id, f"{param}.tool_call_id")
        if "content" not in message and not calls:
            raise CompletionError("Each message needs a 'content'.", param=f"{param}.content")
        text = _text(message.get("content"), f"{param}.content", role)
        _storable(text, f"{param}.content")
        if len(text) > settings.DELLM_MAX_MESSAGE_CHARS:
            raise CompletionError(
                f"A message has at most {settings.DELLM_MAX_MESSAGE_CHARS} characters.",
                param=f"{param}.content",
                code="string_above_max_length",
            )
        if role in SYSTEM_ROLES:
            system.append(text)
        elif text.strip() or calls or role == "tool":
            # A tool step holds its position even without text: the client sent it, the thread stores it.
            conversation.append(Said(role=role, text=text, tool_calls=calls, tool_call_id=call_id))
            indexes.append(index)
    _tool_order(conversation, indexes)
    if not conversation or conversation[-1].role not in ("user", "tool"):
        raise CompletionError(
            "The last message must be a user message with some text, or the results of the tool calls before it.",
            param="messages",
        )
    instructions = "\n\n".join(text for text in system if text.strip())
    # Stored as one message of the thread (chat.turns.start.turn_create), so bounded like one.
    if len(instructions) > settings.DELLM_MAX_MESSAGE_CHARS:
        raise CompletionError(
            f"The system and developer messages together have at most {settings.DELLM_MAX_MESSAGE_CHARS} characters.",
            param="messages",
            code="string_above_max_length",
        )
    if model not in model_ids():
        raise CompletionError(
            f"The model '{model}' does not exist or you do not have access to it.",
            status=404,
            param="model",
            code="model_not_found",
        )
    if thread_header is not None:
        thread_id = _thread_id(thread_header, "X-DeLLM-Thread")
    else:
        thread_id = _thread_id((metadata or {}).get("dellm_thread"), "metadata.dellm_thread")
    return CompletionRequest(
        model=model,
        system=instructions,
        conversation=conversation,
        stream=bool(stream),
        include_usage=include_usage,
        thread_id=thread_id,
        tools=tools,
    )


def estimate_tokens(text: str) -> int:
    """OpenAI's rule of thumb (about four characters a token): DeLLM does not tokenize."""
    return (len(text) + 3) // 4


def usage(prompt: str, completion: str) -> dict[str, int]:
    prompt_tokens, completion_tokens = estimate_tokens(prompt), estimate_tokens(completion)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_id(turn_id: int | None, deletion_id: int | None = None) -> str:
    return f"chatcmpl-dellm-turn-{turn_id}" if turn_id is not None else f"chatcmpl-dellm-deletion-{deletion_id}"


def wire_tool_calls(calls: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Stored tool calls ([{"id", "name", "arguments"}]) in OpenAI's shape."""
    return [
        {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
        for call in calls
    ]


def completion(
    *, id: str, model: str, text: str, dellm: dict, usage: dict, tool_calls: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["content"] = text or None
        message["tool_calls"] = wire_tool_calls(tool_calls)
    return {
        "id": id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": usage,
        "system_fingerprint": None,
        "dellm": dellm,
    }


def chunk(
    *,
    id: str,
    model: str,
    created: int,
    delta: dict | None = None,
    finish_reason: str | None = None,
    dellm: dict | None = None,
    with_usage: bool = False,
    usage: dict | None = None,
    usage_chunk: bool = False,
) -> str:
    """One `data:` event of a stream.

    `with_usage` (the client asked for `stream_options.include_usage`) puts a
    `usage` field on the chunk: null on every chunk but the usage-only one
    (`usage_chunk`, no choices) that comes right before `[DONE]`.
    """
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": []
        if usage_chunk
        else [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}],
    }
    if with_usage or usage_chunk:
        body["usage"] = usage
    if dellm is not None:
        body["dellm"] = dellm
    return sse_data(body)


def sse_data(payload: dict) -> str:
    return EventStreamRenderer.data(payload)


DONE = EventStreamRenderer.frame("[DONE]")
