"""The graph's fast JSON renderer writes what DRF's writes (core/api/renderers.py)."""

import json

from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer

from core.api.renderers import FastJSONRenderer


def test_the_fast_renderer_writes_drfs_json():
    body = {
        "nodes": [{"data": {"id": 1, "label": '#1 user: Zoë\'s café \u2028 "quoted"', "imported_from": None}}],
        "edges": [{"data": {"id": "e1-2", "source": 1, "target": 2, "score": 0.1 + 0.2, "rank": 0}}],
        "truncated": False,
    }
    fast = FastJSONRenderer().render(body)
    assert json.loads(fast) == json.loads(JSONRenderer().render(body)) == body
    assert FastJSONRenderer().render(None) == b""


def test_what_orjson_cannot_write_is_written_by_drf():
    # A lazy translation string, a key that is not a string: DRF's renderer writes them.
    for body in ({"error": {"message": gettext_lazy("Not found.")}}, {1: "one"}):
        assert FastJSONRenderer().render(body) == JSONRenderer().render(body)
