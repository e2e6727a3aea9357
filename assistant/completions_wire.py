"""The OpenAI wire format of `/v1/`: request validation, completion objects, chunks and errors.

Field names follow OpenAI's chat completions API. DeLLM adds one field, `dellm`,
on a completion and on the last chunk of a stream (docs: "OpenAI-compatible
endpoint"). Validation is OpenAI's: unknown fields are ignored, what DeLLM
cannot honour (several choices, tools, images, audio, structured output) is a
400 naming the parameter, never silently dropped.
"""

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from assistant.completions import Said
from dellm_site.event_streams import EventStreamRenderer, StreamRefused

# Roles whose text is an instruction, not conversation: joined into one stored system prompt (never memory).
SYSTEM_ROLES = ("system", "developer")
CONVERSATION_ROLES = ("user", "assistant")
# A transcript longer than this is refused (each request is aligned in full).
MAX_MESSAGES = 1000
# Parameters that ask for something DeLLM does not do; a non-empty value is refused.
UNSUPPORTED = {
    "tools": "Tools (function calling) are not supported by DeLLM.",
    "functions": "Function calling is not supported by DeLLM.",
    "tool_choice": "Tools (function calling) are not supported by DeLLM.",
    "function_call": "Function calling is not supported by DeLLM.",
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


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    system: str
    conversation: list[Said]
    stream: bool
    include_usage: bool
    thread_id: int | None


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
    if "\x00" in text:
        raise CompletionError("Text may not contain NUL characters.", param=param, code="invalid_value")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise CompletionError(
            "Text may not contain lone surrogate characters.", param=param, code="invalid_value"
        ) from None


def _thread_id(raw: object, param: str) -> int | None:
    if raw is None or raw == "":
        return None
    text = str(raw).strip()
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise CompletionError("A DeLLM thread key is a thread id (a whole number).", param=param)
    return int(text)


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
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise CompletionError("'metadata' must be an object.", param="metadata")

    system: list[str] = []
    conversation: list[Said] = []
    for index, message in enumerate(messages):
        param = f"messages[{index}]"
        if not isinstance(message, dict):
            raise CompletionError("Each message must be an object with a role and content.", param=param)
        role = message.get("role")
        if role in ("tool", "function") or message.get("tool_calls") or message.get("function_call"):
            raise CompletionError(UNSUPPORTED["tools"], param=f"{param}.role", code="unsupported_parameter")
        if role not in (*SYSTEM_ROLES, *CONVERSATION_ROLES):
            raise CompletionError(
                f"Invalid role {role!r}: expected one of system, developer, user, assistant.", param=f"{param}.role"
            )
        if "content" not in message:
            raise CompletionError("Each message needs a 'content'.", param=f"{param}.content")
        text = _text(message["content"], f"{param}.content", role)
        _storable(text, f"{param}.content")
        if len(text) > settings.DELLM_MAX_MESSAGE_CHARS:
            raise CompletionError(
                f"A message has at most {settings.DELLM_MAX_MESSAGE_CHARS} characters.",
                param=f"{param}.content",
                code="string_above_max_length",
            )
        if role in SYSTEM_ROLES:
            system.append(text)
        elif text.strip():
            conversation.append(Said(role=role, text=text))
    if not conversation or conversation[-1].role != "user":
        raise CompletionError("The last message must be a user message with some text.", param="messages")
    instructions = "\n\n".join(text for text in system if text.strip())
    # Stored as one message of the thread (chat.services.turn_create), so bounded like one.
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


def completion(*, id: str, model: str, text: str, dellm: dict, usage: dict) -> dict[str, Any]:
    return {
        "id": id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
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
