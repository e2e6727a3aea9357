"""DRF's JSON renderer, encoded by orjson: for the largest plain documents.

The graph window of 10,000 messages and their 20,000 edges is 4 MB of JSON;
DRF's renderer (the standard library's encoder) took 70-77 ms to write it,
orjson 4-7 ms, the same JSON (lab/HISTORY.md, "The graph page"; orjson
leaves U+2028 and U+2029 unescaped, which JSON allows, and writes a NaN
score as null where DRF's renderer failed). A body orjson cannot write (a
lazy translation string, a key that is not a string) is written by DRF's
own renderer.
"""

from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer


class FastJSONRenderer(JSONRenderer):
    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        try:
            return orjson.dumps(data)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
