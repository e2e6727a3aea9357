"""The body of an ASGI request outside Django (`/mcp`): Django's ceiling and the JSON depth limit, read lazily."""

import pytest
from django.conf import settings

from core.api.asgi_body import BodyRefused, body_replayed, json_body_read
from tests.helpers import run_async

CEILING = settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # 2.5 MB, Django's default


def _scope(**headers: str) -> dict:
    return {"type": "http", "method": "POST", "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}


def _receiver(messages: list[dict]):
    """A `receive` that hands out `messages` in order and counts how many were asked for."""
    asked = []

    async def receive() -> dict:
        asked.append(1)
        return messages[len(asked) - 1]

    return receive, asked


def _refusal(scope: dict, receive) -> tuple[int, str]:
    with pytest.raises(BodyRefused) as refused:
        run_async(json_body_read, scope, receive)
    return refused.value.status, refused.value.code


def test_a_declared_length_over_the_ceiling_is_refused_before_a_byte_is_read():
    receive, asked = _receiver([])
    assert _refusal(_scope(**{"content-length": str(CEILING + 1)}), receive) == (413, "payload_too_large")
    assert asked == []


def test_a_body_without_a_length_is_read_only_until_it_passes_the_ceiling():
    megabyte = {"type": "http.request", "body": b"x" * 1_000_000, "more_body": True}
    receive, asked = _receiver([megabyte] * 10)
    assert _refusal(_scope(), receive) == (413, "payload_too_large")
    assert len(asked) == 3


def test_a_body_at_the_ceiling_is_read_whole_and_handed_on_then_the_disconnect():
    half = b"[" + b" " * (CEILING // 2 - 1)
    parts = [
        {"type": "http.request", "body": half, "more_body": True},
        {"type": "http.request", "body": b" " * (CEILING - len(half) - 1) + b"]", "more_body": False},
        {"type": "http.disconnect"},
    ]
    receive, _ = _receiver(parts)

    async def read_then_replay() -> list[dict]:
        body = await json_body_read(_scope(**{"content-length": str(CEILING)}), receive)
        replay = body_replayed(body, receive)
        return [await replay(), await replay()]

    first, then = run_async(read_then_replay)
    assert (len(first["body"]), first["more_body"], then) == (CEILING, False, {"type": "http.disconnect"})


def test_depth_is_checked_on_the_bytes_and_what_is_not_text_is_left_to_the_parser():
    for body, depth_ok in [(b"[" * 101 + b"]" * 101, False), (b"[" * 100 + b"]" * 100, True), (b"\xff[[", True)]:
        receive, _ = _receiver([{"type": "http.request", "body": body, "more_body": False}])
        if depth_ok:
            assert run_async(json_body_read, _scope(), receive) == body
        else:
            assert _refusal(_scope(), receive) == (400, "malformed_request")


def test_a_client_that_goes_away_mid_body_gets_no_answer():
    receive, _ = _receiver([{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}])
    assert run_async(json_body_read, _scope(), receive) is None
