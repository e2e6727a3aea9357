"""A JSON body nested too deep is a 400 at every JSON door, never a 500.

`[` x 100,000 made `json.loads` raise RecursionError, which DRF's parser does
not catch (it is not a ValueError): a 500 and a traceback in the log, from
`POST /api/auth/token/` without signing in. Every door now parses with
core/api/json_body.py, which measures the depth first, in linear time.
"""

import logging
import sys

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.parsers import MultiPartParser
from rest_framework.test import APIClient
from rest_framework.views import APIView

from chat.models import Message, Thread
from core.api import json_body
from core.api.json_body import JSONTooDeep, json_depth_exceeds, json_parse
from core.auth.tokens import token_create
from tests.core.api.test_errors import error_of

DEEP = "[" * 100_000
LIMIT = 100


def _no_error_logged(caplog) -> None:
    assert [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("body", [DEEP, '{"username": ' + DEEP, "{" * 100_000])
def test_token_endpoint_answers_400_to_deep_json_without_signing_in(db, caplog, body):
    response = APIClient().post("/api/auth/token/", body, content_type="application/json")
    error = error_of(response, 400)
    assert error["code"] == "malformed_request"
    assert error["message"] == f"JSON parse error - arrays and objects are nested more than {LIMIT} deep."
    _no_error_logged(caplog)


def test_signed_in_json_doors_answer_400_to_deep_json(api, thread, caplog):
    for url in ["/api/threads/", f"/api/threads/{thread.pk}/messages/", "/api/deletions/"]:
        response = api.post(url, '{"content": ' + DEEP + "]}", content_type="application/json")
        assert error_of(response, 400)["code"] == "malformed_request", url
    assert (Thread.objects.count(), Message.objects.count()) == (1, 0)
    _no_error_logged(caplog)


def test_v1_answers_400_to_deep_json(owner, caplog):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_create(user=owner)[1]}")
    response = client.post("/v1/chat/completions", data=DEEP, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "We could not parse the JSON body of your request."
    assert not Message.objects.exists()
    _no_error_logged(caplog)


def _views(patterns: list) -> list[type[APIView]]:
    found: list[type[APIView]] = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _views(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            view = getattr(pattern.callback, "cls", None)
            if isinstance(view, type) and issubclass(view, APIView):
                found.append(view)
    return found


def test_every_drf_view_parses_json_with_the_depth_limited_parser():
    views = _views(get_resolver().url_patterns)
    assert len(views) > 20
    parsers = {(view.__name__, parser) for view in views for parser in view().parser_classes}
    # Uploads are multipart (the import); every other body is JSON through json_body.
    assert {parser for _, parser in parsers} == {json_body.JSONParser, MultiPartParser}


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ("[" * LIMIT + "]" * LIMIT, False),
        ("[" * (LIMIT + 1) + "]" * (LIMIT + 1), True),
        ('{"a": ' * LIMIT + "1" + "}" * LIMIT, False),
        ('{"a": ' * (LIMIT + 1) + "1" + "}" * (LIMIT + 1), True),
        # Brackets in strings are text, escaped quotes do not end a string, an escaped backslash does not escape.
        ('["' + "[" * 500 + '"]', False),
        ('["\\"' + "[" * 500 + '"]', False),
        ('["\\\\"' + "[" * 500, True),
        ("[]" * 5_000, False),
    ],
)
def test_depth_scan_counts_nesting_outside_strings(text, deep):
    assert json_depth_exceeds(text, LIMIT) is deep


def test_json_parse_refuses_what_json_refuses_and_more():
    assert json_parse(b'{"a": [1, "[[["]}') == {"a": [1, "[[["]}
    value = json_parse("[" * LIMIT + "]" * LIMIT)
    for _ in range(LIMIT - 1):
        (value,) = value
    assert value == []
    assert json_parse('"caf\\u00e9"'.encode("utf-16")) == "café"
    for bad in [b"{bad", b"\xff", b"NaN", b"[Infinity]"]:
        with pytest.raises(ValueError):
            json_parse(bad)
    with pytest.raises(JSONTooDeep):
        json_parse(DEEP)


# --- Linear, by count: the Python lines the scan executes, for adversarial bodies ---

# Pieces of the scan's own grammar: brackets, quotes, backslashes, the input it branches on.
PIECES = ["[", "]", "{", "}", '"', "\\", '\\"', "\\\\", ",", ":", " ", "1", "a", '""', "[]", '"["', "\\["]
LINES_PER_CHAR = 12


def _lines_run(text: str, limit: int) -> int:
    """Python line events inside json_depth_exceeds while it scans `text`."""
    code = json_depth_exceeds.__code__
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if frame.f_code is code:
            if event == "line":
                count += 1
            return trace
        return None

    sys.settrace(trace)
    try:
        json_depth_exceeds(text, limit)
    finally:
        sys.settrace(None)
    return count


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=400), st.integers(min_value=0, max_value=300))
def test_depth_scan_work_is_linear_in_the_body(pieces, repeat):
    text = "".join(pieces) * (1 + repeat // 100)
    # At most a constant number of steps per character, whatever the input: a scan
    # that re-read text (backtracking, rescanning strings) would exceed it.
    # The limit just under the bracket count, so the cheap count does not skip the scan.
    limit = max(0, text.count("[") + text.count("{") - 1)
    assert _lines_run(text, limit) <= LINES_PER_CHAR * (len(text) + 1)
