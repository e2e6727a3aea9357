"""A JSON request body for an ASGI app outside Django (`/mcp`, the MCP SDK's), held to Django's ceilings.

The SDK reads a POST's whole body into memory and parses it itself, so
neither DATA_UPLOAD_MAX_MEMORY_SIZE nor DELLM_JSON_MAX_DEPTH, which every
Django door applies, would reach it. `json_body_read` reads the body first:
a `Content-Length` over the ceiling is refused before a byte is read, and a
body without one (chunked) is read a message at a time and refused as soon
as it passes the ceiling, so no more than the ceiling (plus one ASGI message)
is ever held. Then the project's one depth check (core/api/json_body.py)
runs on it. The app is handed the body again by `body_replayed`.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from core.api.handler import PayloadTooLarge
from core.api.json_body import JSONTooDeep, json_depth_check, json_text

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]


class BodyRefused(Exception):
    """The body is not read on: `status` (413 or 400) with the API's error `code` and `message`."""

    def __init__(self, *, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _too_large() -> BodyRefused:
    return BodyRefused(status=413, code="payload_too_large", message=str(PayloadTooLarge.default_detail))


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


async def json_body_read(scope: Scope, receive: Receive) -> bytes | None:
    """The whole body of the request; None if the client went away before sending it.

    Raises BodyRefused: 413 `payload_too_large` over DATA_UPLOAD_MAX_MEMORY_SIZE
    (declared or read), 400 `malformed_request` nested deeper than
    DELLM_JSON_MAX_DEPTH. A body that is not text in a JSON encoding is left
    to the app's own parser to refuse.
    """
    ceiling = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    declared = _declared_length(scope)
    if ceiling is not None and declared is not None and declared > ceiling:
        raise _too_large()
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        part = message.get("body", b"")
        size += len(part)
        if ceiling is not None and size > ceiling:
            raise _too_large()
        parts.append(part)
        if not message.get("more_body", False):
            break
    body = b"".join(parts)
    try:
        json_depth_check(json_text(body))
    except JSONTooDeep as exc:
        # Worded as the API's JSON parser words it (core/api/json_body.py, JSONParser).
        raise BodyRefused(status=400, code="malformed_request", message=f"JSON parse error - {exc}.") from None
    except ValueError:
        pass  # not text: the app's parser answers it as the malformed JSON it is
    return body


def body_replayed(body: bytes, receive: Receive) -> Receive:
    """`receive` for the app that reads the request next: `body` whole, then what the client sends (a disconnect)."""
    given = False

    async def replay() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
