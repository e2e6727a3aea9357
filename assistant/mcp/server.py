"""DeLLM's MCP server (the official `mcp` SDK): the tools of assistant/mcp/tools.py, over streamable HTTP and stdio.

Streamable HTTP is served at `/mcp` by the same ASGI application as the rest
(dellm_site/asgi.py routes the path here and runs the SDK's session manager in
uvicorn's lifespan). Every HTTP request carries the user's DeLLM API token,
`Authorization: Bearer <token>` (or `Token <token>`), checked like the API's
(knox, core/auth/tokens.py) on each request, not only the first of a session:
the user a tool acts for is the one whose token came with the call, and a
request without a valid token is refused 401 before the SDK sees it. So is a
body over DATA_UPLOAD_MAX_MEMORY_SIZE (413) or nested deeper than
DELLM_JSON_MAX_DEPTH (400), as at every other door (core/api/asgi_body.py).
Over stdio (`manage.py dellm_mcp`) the user is fixed when the process starts.

Each tool runs its synchronous logic on a pool thread that hands its database
connection back at once (`on_db_briefly`, as the event streams do), and turns
a `DomainError` into a tool error, `<code>: <message>`, that the model can read.
"""

import json
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any

import anyio
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.types import ToolAnnotations
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import Field
from rest_framework import exceptions

from assistant.mcp import tools
from assistant.mcp.tokens import AgentTokenAuthentication
from core.api.asgi_body import BodyRefused, body_replayed, json_body_read
from core.auth.tokens import KEYWORDS
from core.errors import DomainError, error_body
from core.streams.endpoint import on_db_briefly
from core.types import User

logger = logging.getLogger(__name__)

PATH = "/mcp"
# The ASGI scope key the HTTP door puts the authenticated user's id under.
USER_KEY = "dellm.user_id"
INSTRUCTIONS = (
    "DeLLM is the user's long-term memory, and every memory can be erased with everything derived from it. "
    "search_memory before answering from memory; explain an id to see where it came from; remember what you "
    "learn, with derived_from naming the memories you used, so your note leaves with them; forget previews a "
    "deletion and gives the user a link to confirm it."
)
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _client_name(ctx: Context) -> str:
    """The name the client gave in `clientInfo` (initialize, or each request's envelope); "unknown" if none."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None else "unknown"


def _load_user(user_id: int) -> User:
    user: User = get_user_model().objects.get(pk=user_id, is_active=True)
    return user


class _Caller:
    """Who a call is for and the base of the links it answers with: from the HTTP request, or fixed (stdio)."""

    def __init__(self, *, user_id: int | None, base_url: str) -> None:
        self.user_id = user_id
        self.base_url = base_url

    def of(self, ctx: Context) -> tuple[int, str]:
        request = ctx.request_context.request
        scope = getattr(request, "scope", None)
        if scope is not None and USER_KEY in scope:
            host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            domain, _ = split_domain_port(host)
            base = (
                f"{scope.get('scheme', 'http')}://{host}"
                if domain and validate_host(domain, settings.ALLOWED_HOSTS)
                else self.base_url
            )
            return int(scope[USER_KEY]), base
        if self.user_id is None:
            raise ToolError("not_authenticated: no DeLLM user for this call.")
        return self.user_id, self.base_url


async def _run(
    tool: Callable[..., dict[str, Any]], caller: _Caller, ctx: Context, *, links: bool = False, **arguments: Any
) -> dict[str, Any]:
    """`tool` for the call's user on a pool thread; `links`: it answers with links into the web app."""
    user_id, base_url = caller.of(ctx)
    client = _client_name(ctx)
    if links:
        arguments["base_url"] = base_url

    def call() -> dict[str, Any]:
        return tool(user=_load_user(user_id), client=client, **arguments)

    try:
        return await on_db_briefly(call)()
    except DomainError as refused:
        logger.info("mcp %s refused for user %s: %s", tool.__name__, user_id, refused.code)
        raise ToolError(f"{refused.code}: {refused.message}") from None


def build_server(*, user_id: int | None = None, base_url: str = "") -> MCPServer:
    """The MCP server with DeLLM's four tools; `user_id` fixes the user (stdio), else each HTTP request's token does."""
    caller = _Caller(user_id=user_id, base_url=base_url or settings.DELLM_PUBLIC_URL)
    server = MCPServer(name="DeLLM", title="DeLLM memory", instructions=INSTRUCTIONS, version="1")
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=reading)
    async def search_memory(
        query: Annotated[str, Field(description="What to look for, in words.", max_length=tools.MAX_QUERY_CHARS)],
        ctx: Context,
        k: Annotated[int, Field(description="How many memories at most.", ge=1, le=tools.MAX_K)] = 5,
    ) -> dict[str, Any]:
        """The user's memories that DeLLM's retrieval finds for `query`, best first: id, date, text and why
        (same words, similar meaning). A fact about the user (role `fact`) also names its `subject` and
        `sources`, the messages it was drawn from. Each search is logged (ids, client, time; never text)."""
        return await _run(tools.search_memory, caller, ctx, query=query, k=k)

    @server.tool(annotations=reading)
    async def explain(id: Annotated[int, Field(description="A memory id.", ge=1)], ctx: Context) -> dict[str, Any]:
        """Where memory `id` came from (the memories it derives from, and why each) and what was derived
        from it (everything that would go with it, each with its path). A fact also says its `subject`,
        whether it is `current`, and else which fact `superseded_by` it."""
        return await _run(tools.explain, caller, ctx, id=id)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    async def remember(
        text: Annotated[str, Field(description="The note to keep.", max_length=settings.DELLM_MAX_MESSAGE_CHARS)],
        ctx: Context,
        derived_from: Annotated[
            list[int] | None,
            Field(description="Ids of the memories you used to write it.", max_length=tools.MAX_DERIVED_FROM),
        ] = None,
    ) -> dict[str, Any]:
        """Store a note in the user's memory, deriving from the memories you used (`derived_from`): it is
        retrieved like the user's own messages, and forgetting any of its sources removes it too."""
        return await _run(tools.remember, caller, ctx, text=text, derived_from=derived_from)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False))
    async def forget(
        ctx: Context,
        request: Annotated[
            str | None,
            Field(description="What to forget, as the user would say it: “forget that I live in Paris”."),
        ] = None,
        ids: Annotated[list[int] | None, Field(description="Or the memory ids to forget.")] = None,
        mode: Annotated[str, Field(description="soft (undoable) or purge (text destroyed).")] = "soft",
        confirm: Annotated[bool, Field(description="Confirm now; only if the user allowed it in settings.")] = False,
    ) -> dict[str, Any]:
        """Preview deleting memories and everything derived from them: what would go and why, which memories
        agents have read, and `confirm_url`, the link where the user confirms it in DeLLM."""
        return await _run(tools.forget, caller, ctx, links=True, request=request, ids=ids, mode=mode, confirm=confirm)

    return server


def token_principal(header: bytes) -> tuple[int, str] | None:
    """(user id, token key) of the active user whose agent token `header` (`Bearer <t>` or `Token <t>`) carries."""
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() not in KEYWORDS:
        return None
    try:
        user, token = AgentTokenAuthentication().authenticate_credentials(parts[1])
    except exceptions.AuthenticationFailed:
        return None
    return int(user.pk), str(token.token_key)


def token_user(header: bytes) -> int | None:
    """The id of the active user whose agent token `header` carries; None otherwise."""
    principal = token_principal(header)
    return None if principal is None else principal[0]


def _principal(user_id: int, token_key: str) -> AuthenticatedUser:
    # The SDK binds a session to the principal that opened it (`scope["user"]`, compared on every later
    # request): another token, another user's or the same user's, is answered as if it did not exist.
    return AuthenticatedUser(AccessToken(token="", client_id=f"dellm:{user_id}:{token_key}", scopes=[]))


_SINGLE_HEADERS = (b"authorization", b"mcp-session-id", MCP_PROTOCOL_VERSION_HEADER.encode("ascii"))


def _opens_a_session(scope: Scope, headers: dict[bytes, bytes]) -> bool:
    """A POST of the handshake era without a session id: the SDK opens a session for it.

    The per-request era (a protocol version the handshake never had) keeps no session.
    """
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER.encode("ascii"))
    handshake = version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
    return scope.get("method") == "POST" and b"mcp-session-id" not in headers and handshake


def _listens(body: bytes) -> bool:
    """A `subscriptions/listen` request: its answer is a notification stream that stays open."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "subscriptions/listen"


_PING = b": ping\r\n\r\n"


async def _idle_bounded(
    handle: Callable[[Scope, Receive, Send], Awaitable[None]], scope: Scope, receive: Receive, send: Send
) -> None:
    """`handle` (a listen stream), ended after DELLM_MCP_SESSION_IDLE_SECONDS with nothing sent but pings."""
    idle = settings.DELLM_MCP_SESSION_IDLE_SECONDS
    last = time.monotonic()
    state = {"started": False, "ended": False}

    async def sending(message: MutableMapping[str, Any]) -> None:
        nonlocal last
        if message["type"] == "http.response.start":
            state["started"] = True
        if message.get("body") != _PING:
            last = time.monotonic()
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            state["ended"] = True
        await send(message)

    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while (left := last + idle - time.monotonic()) > 0:
                await anyio.sleep(left)
            group.cancel_scope.cancel()

        group.start_soon(watch)
        await handle(scope, receive, sending)
        group.cancel_scope.cancel()
    if state["started"] and not state["ended"]:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _session_admitted(user_id: int) -> bool:
    """A new session for `user_id`: within DELLM_MCP_SESSION_RATE a minute (Redis, shared by the processes)."""
    key = f"mcp-sessions:{user_id}:{int(time.time() // 60)}"
    cache.add(key, 0, timeout=120)
    return cache.incr(key) <= settings.DELLM_MCP_SESSION_RATE


class McpApp:
    """`/mcp` over streamable HTTP: the token check, then the SDK's session manager (run in the lifespan)."""

    def __init__(self) -> None:
        self.server = build_server()
        # A bearer token, not a cookie, authenticates: a page a browser was lured to cannot send it, so the
        # SDK's Host/Origin allow-list (for unauthenticated local servers) would only refuse real proxies.
        self.server.streamable_http_app(
            streamable_http_path=PATH,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=settings.DELLM_MCP_SESSION_IDLE_SECONDS,
            max_sessions=settings.DELLM_MCP_MAX_SESSIONS,
        )
        self.manager = self.server.session_manager
        # Per user, what the SDK's registry does not hold: handshakes in flight (a session counts from its
        # first request, not once it is registered) and open `subscriptions/listen` streams. One event loop
        # per process: a check and its increment run with no await between them.
        self._held: Counter[int] = Counter()

    def _open_sessions(self, user_id: int) -> int:
        # The SDK's own registry of open sessions and who opened each (its session binding's).
        owners = self.manager._session_owners
        registered = sum(
            1
            for session, owner in owners.items()
            if session in self.manager._server_instances and owner["client_id"].startswith(f"dellm:{user_id}:")
        )
        return registered + self._held[user_id]

    def _open_everywhere(self) -> int:
        return len(self.manager._server_instances) + self._held.total()

    async def _held_open(self, user_id: int, scope: Scope, receive: Receive, send: Send, listen: bool) -> None:
        """A session's handshake or a listen stream, counted against the user's and the server's bounds.

        Its place is taken at once, with the check (no await between them: concurrent handshakes cannot all
        pass it), and given back when it ends or is refused."""
        if self._open_sessions(user_id) >= settings.DELLM_MCP_SESSIONS_PER_USER:
            message = f"At most {settings.DELLM_MCP_SESSIONS_PER_USER} MCP sessions at once: end one first."
            await _error(send, 429, "throttled", message, headers=[(b"retry-after", b"60")])
            return
        if self._open_everywhere() >= settings.DELLM_MCP_MAX_SESSIONS:
            await _error(send, 503, "service_unavailable", "Too many MCP sessions are open: try again in a minute.")
            return
        self._held[user_id] += 1
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self._held[user_id] -= 1
                if self._held[user_id] <= 0:
                    del self._held[user_id]

        async def registered(message: MutableMapping[str, Any]) -> None:
            # The handshake's answer names its session: the SDK's registry counts it from here on.
            if message["type"] == "http.response.start" and any(
                name.lower() == b"mcp-session-id" for name, _ in message.get("headers", [])
            ):
                release()
            await send(message)

        try:
            if not await on_db_briefly(_session_admitted)(user_id):
                message = f"At most {settings.DELLM_MCP_SESSION_RATE} new MCP sessions a minute."
                await _error(send, 429, "throttled", message, headers=[(b"retry-after", b"60")])
            elif listen:
                await _idle_bounded(self.manager.handle_request, scope, receive, send)
            else:
                await self.manager.handle_request(scope, receive, registered)
        finally:
            release()

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return self.manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        send = _stored_nowhere(send)
        pairs = scope.get("headers") or []
        names = [name for name, _ in pairs]
        if any(names.count(name) > 1 for name in _SINGLE_HEADERS):
            # The SDK reads the first of a repeated header and a dict the last: one answer for both, none.
            await _error(send, 400, "malformed_request", "Send each MCP header once.")
            return
        headers = dict(pairs)
        header = headers.get(b"authorization", b"")
        principal = await on_db_briefly(token_principal)(header) if header else None
        if principal is None:
            await _error(
                send,
                401,
                "not_authenticated",
                "Send a DeLLM agent token (made in the web app): `Authorization: Bearer <token>`.",
                headers=[(b"www-authenticate", b'Bearer realm="DeLLM"')],
            )
            return
        body: bytes | None = None
        if scope.get("method") == "POST":
            # The SDK would read any body whole and parse it at any depth: Django's ceilings first.
            try:
                body = await json_body_read(scope, receive)
            except BodyRefused as refused:
                await _error(send, refused.status, refused.code, refused.message)
                return
            if body is None:
                return  # the client went away
            receive = body_replayed(body, receive)
        user_id, token_key = principal
        listen = body is not None and _listens(body)
        scope = {**scope, USER_KEY: user_id, "user": _principal(user_id, token_key)}
        if not listen and not _opens_a_session(scope, headers):
            await self.manager.handle_request(scope, receive, send)
            return
        # Each session holds a server task and its streams until it ends or idles out; a listen stream (the
        # per-request era's long-lived one) holds a task and a connection: both count against the same bounds.
        await self._held_open(user_id, scope, receive, send, listen)


def _stored_nowhere(send: Send) -> Send:
    """`Cache-Control: no-store` on every /mcp answer, whatever the SDK set (`no-cache` on its streams):
    its bodies hold memories, and a cached copy would outlive a purge (docs/SECURITY.md)."""

    async def sending(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            kept = [(name, value) for name, value in message.get("headers", []) if name.lower() != b"cache-control"]
            message = {**message, "headers": [*kept, (b"cache-control", b"no-store")]}
        await send(message)

    return sending


async def _error(
    send: Send, status: int, code: str, message: str, *, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A refusal before the MCP layer, in the API's JSON error shape (docs/API.md, "Errors")."""
    body = json.dumps(error_body(code, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                *(headers or []),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
