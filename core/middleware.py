"""Content-Security-Policy on every HTML page, and the import map it allows.

The pages load only our own static files: scripts are ES modules under
/static/ (no inline scripts, no inline event handlers), styles are stylesheet
files, data reaches the scripts through data- attributes or a JSON script tag
(`type="application/json"` is data, never executed). So the policy forbids
everything inline, and an injected `<script>` in a message would not run even
if escaping ever failed. The one inline element is the import map, which
browsers only take inline: it is allowed by the hash of its exact text, so
no other inline script gains anything from it. A view that needs another
policy sets the header itself; it is left as it is.
"""

import base64
import functools
import hashlib
import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.templatetags.static import static
from django.utils.cache import add_never_cache_headers, patch_cache_control
from django.utils.safestring import SafeString, mark_safe
from whitenoise.middleware import WhiteNoiseMiddleware

# Bare specifiers our modules import, mapped to the ESM builds that `npm ci`
# installs under frontend/node_modules (served by staticfiles, see settings).
# cytoscape-dagre 4 ships an ES module with dagre bundled inside it (the
# focused neighbourhood's layout on the page); the graph's own layout runs
# dagre in a worker (frontend/static/js/graph/layout-worker.js), which has no
# import map and takes this entry's URL from the page.
IMPORTS = {
    "cytoscape": "vendor/cytoscape/cytoscape.esm.min.mjs",
    "cytoscape-dagre": "vendor/cytoscape-dagre/cytoscape-dagre.min.mjs",
    "@dagrejs/dagre": "vendor/dagre/dagre.esm.js",
}


@functools.cache
def import_map() -> SafeString:
    """The `<script type="importmap">` text; its hash goes into the policy."""
    text = json.dumps({"imports": {name: static(path) for name, path in IMPORTS.items()}}, separators=(",", ":"))
    # Raw text inside <script>: nothing in static URLs may close the element.
    if "<" in text:
        raise ValueError("import map URLs may not contain '<'")
    return mark_safe(text)


@functools.cache
def policy() -> str:
    digest = base64.b64encode(hashlib.sha256(import_map().encode()).digest()).decode()
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' 'sha256-{digest}'",
            "style-src 'self'",
            "img-src 'self' data:",
            "font-src 'self'",
            "connect-src 'self'",
            # The graph's layout worker (frontend/static/js/graph/layout-worker.js), a module of our own.
            "worker-src 'self'",
            "frame-ancestors 'none'",
            "form-action 'self'",
            "object-src 'none'",
            "base-uri 'self'",
        ]
    )


def import_map_context(request: HttpRequest) -> dict[str, str]:
    """Template context processor: `{{ import_map }}` for base templates."""
    return {"import_map": import_map()}


class ContentSecurityPolicyMiddleware:
    """The policy on every HTML answer. Sync and async (see StaticFilesMiddleware for why)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        return _with_policy(self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        return _with_policy(await self.get_response(request))


def _with_policy(response: HttpResponseBase) -> HttpResponseBase:
    if response.get("Content-Type", "").startswith("text/html"):
        response.headers.setdefault("Content-Security-Policy", policy())
    return response


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, able to pass an async view's request on without a thread.

    One sync-only middleware makes Django run the rest of the chain through
    `async_to_sync` on a thread that waits for the view. The long-lived
    requests (dellm_site/asgi.py) share one such thread per process, so a
    non-streaming `/v1` completion, whose view waits for the reply, held it up
    to DELLM_SSE_TIMEOUT and every other stream and completion of the process
    waited behind it. Static files are still served as WhiteNoise serves them.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        static_file = self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)
        if static_file is not None:
            return self.serve(static_file, request)
        return await self.get_response(request)


def development_mode_context(request: HttpRequest) -> dict[str, bool]:
    """Template context processor: `{{ development_mode }}` puts a banner on every page."""
    return {"development_mode": settings.DEBUG}


class NoStoreMiddleware:
    """`Cache-Control: no-store` on every answer of the application.

    API responses, pages and turn streams carry message text; a copy in a
    browser or proxy cache would outlive a purge. Static files (served by
    WhiteNoise, above this middleware) keep their caching; nothing the
    application itself renders is worth caching against that risk, so
    `no-store` is added even where a view set its own Cache-Control. Sync and
    async, so an async view (the turn stream) is not pushed onto a thread.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        return _no_store(self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        return _no_store(await self.get_response(request))


def _no_store(response: HttpResponseBase) -> HttpResponseBase:
    if response.has_header("Cache-Control"):
        patch_cache_control(response, no_store=True)
    else:
        add_never_cache_headers(response)
    return response
