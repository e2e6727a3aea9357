"""The ASGI application, served by uvicorn (Procfile `web:`, docs/DEPLOYMENT.md).

Django's ASGI handler runs each request inside a `ThreadSensitiveContext`: the
first synchronous middleware call creates a one-thread executor for that
request, and the thread lives until the response has been sent. For the turn
and import streams (chat/turns/stream_view.py, chat/imports/views.py), which may stay open
for minutes, that would be one parked thread per open stream (tests/chat/turns/test_turn_stream.py measures it). Its
requests skip the context: the few synchronous middleware steps they take
(none touches the database for a GET) run on asgiref's shared sync thread, and
the view does its own database work on pool threads that it hands back at once.

`/mcp` is DeLLM's MCP server over streamable HTTP (assistant/mcp/server.py), an
ASGI app of the official `mcp` SDK beside Django's: its session manager runs
for the life of the process, started and stopped by uvicorn's lifespan
protocol (which Django's handler does not speak), so the server needs
uvicorn's default `--lifespan auto` (or `on`).
"""

import os
import re
from typing import Any

from django.core.asgi import get_asgi_application
from django.core.handlers.asgi import ASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dellm_site.settings")

# The turn and import streams, and the OpenAI-compatible completion
# (openai-endpoint), which waits on the same turn events for as long, streaming or not.
LONG_LIVED = re.compile(r"^/(api/turns/\d+/events/|api/imports/\d+/events/|v1/chat/completions/?)$")
MCP = re.compile(r"^/mcp/?$")


class DeLLMASGIHandler(ASGIHandler):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and LONG_LIVED.match(scope.get("path", "")):
            await self.handle(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _application() -> Any:
    get_asgi_application()  # django.setup()
    from django.conf import settings

    app: Any = DeLLMASGIHandler()
    if settings.DEBUG and "django.contrib.staticfiles" in settings.INSTALLED_APPS:
        # What runserver does in development; in production static files come
        # from whitenoise or the proxy.
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        app = ASGIStaticFilesHandler(app)
    from assistant.mcp.server import McpApp
    from chat.index.embeddings import embedder_preload

    embedder_preload()  # before the first request, which would wait for it
    return PathRouter(django=app, mcp=McpApp())


class PathRouter:
    """Django for every path but `/mcp`, which goes to the MCP server; the lifespan runs the MCP sessions."""

    def __init__(self, *, django: Any, mcp: Any) -> None:
        self.django = django
        self.mcp = mcp

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http" and MCP.match(scope.get("path", "")):
            await self.mcp(scope, receive, send)
        else:
            await self.django(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        await receive()  # lifespan.startup
        started = False
        try:
            async with self.mcp.lifespan():
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()  # lifespan.shutdown
        except Exception as exc:
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": failed, "message": type(exc).__name__})
            return
        await send({"type": "lifespan.shutdown.complete"})


application = _application()
