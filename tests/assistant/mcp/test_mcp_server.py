"""The MCP server end to end with the official MCP client: streamable HTTP against uvicorn serving the real
ASGI app (`/mcp`), and stdio against `manage.py dellm_mcp`."""

import contextlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import Implementation

from assistant.mcp.tokens import agent_token_create
from chat.index.embeddings import embed_one
from chat.models import MemoryRead, Message
from core.auth.tokens import token_create
from provenance.deletions.confirm import deletion_confirm
from tests import helpers
from tests.factories import make_message, make_thread
from tests.helpers import ROOT, run_async

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

AGENT = Implementation(name="pytest-agent", version="1.0")


def _answer(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


def _error(result) -> str:
    assert result.is_error
    return result.content[0].text


async def _session(client: Client, paris: Message, theirs: Message) -> dict:
    """The calls both transports make: search, remember with derived_from, explain, forget preview, isolation."""
    tools = sorted(tool.name for tool in (await client.list_tools()).tools)
    found = _answer(await client.call_tool("search_memory", {"query": "observatory Paris", "k": 3}))
    note = _answer(
        await client.call_tool(
            "remember", {"text": "Alice works at the Paris observatory", "derived_from": [found["memories"][0]["id"]]}
        )
    )
    again = _answer(await client.call_tool("search_memory", {"query": "observatory"}))
    explained = _answer(await client.call_tool("explain", {"id": note["id"]}))
    preview = _answer(await client.call_tool("forget", {"ids": [paris.pk], "mode": "purge"}))
    theirs_error = _error(await client.call_tool("explain", {"id": theirs.pk}))
    missing_error = _error(await client.call_tool("explain", {"id": 10**9}))
    bad_k = _error(await client.call_tool("search_memory", {"query": "Paris", "k": 500}))
    return {
        "tools": tools,
        "found": [(m["id"], m["why"]) for m in found["memories"]],
        "note": note,
        "again": sorted(m["id"] for m in again["memories"]),
        "sources": [(s["id"], s["why"]) for s in explained["sources"]],
        "preview": preview,
        "errors": [theirs_error.replace(str(theirs.pk), "N"), missing_error.replace(str(10**9), "N")],
        "bad_k": bad_k,
    }


def _check(session: dict, paris: Message, owner) -> None:
    note_id = session["note"]["id"]
    assert session["tools"] == ["explain", "forget", "remember", "search_memory"]
    assert session["found"] == [(paris.pk, "same words")]
    assert session["note"]["derived_from"] == [paris.pk]
    assert Message.objects.get(pk=note_id).role == "note"
    assert session["again"] == sorted([paris.pk, note_id])
    assert session["sources"] == [(paris.pk, "an agent said it used it")]
    deletion = session["preview"]["deletion"]
    assert (deletion["status"], deletion["matched"], deletion["dependents"]) == ("previewed", [paris.pk], [note_id])
    assert session["preview"]["confirm_url"].endswith(f"/?deletion={deletion['id']}")
    assert [(r["client"], r["tool"]) for r in deletion["agent_reads"]["reads"]] == [
        ("pytest-agent", "explain"),
        ("pytest-agent", "search_memory"),
        ("pytest-agent", "search_memory"),
    ]
    # Another user's id reads exactly like one that does not exist.
    assert session["errors"] == ["Error executing tool explain: not_found: No message with id N."] * 2
    assert "k" in session["bad_k"]
    # One read-log entry per search (and one for the explain), content-free.
    assert list(MemoryRead.objects.filter(owner=owner).order_by("id").values_list("client", "tool", "message_ids")) == [
        ("pytest-agent", "search_memory", [paris.pk]),
        ("pytest-agent", "search_memory", sorted([paris.pk, note_id])),
        ("pytest-agent", "explain", [note_id]),
    ]
    # Purging the source takes the agent's note with it, and the receipt names the client that read them.
    done = deletion_confirm(deletion_id=deletion["id"], owner_id=owner.pk, confirmed_by=owner)
    assert Message.objects.get(pk=note_id).status == Message.Status.PURGED
    assert {r["client"] for r in done.receipt["agent_reads"]["reads"]} == {"pytest-agent"}


@pytest.fixture
def memories(owner, other_owner, thread):
    paris = make_message(thread, "I moved to Paris in 2021 for a job at the observatory")
    theirs = make_message(make_thread(other_owner), "Bob's observatory in Paris")
    return paris, theirs


# "auto": the 2026-07-28 protocol (clientInfo with every request); "legacy": the initialize handshake
# of a session, which Claude Desktop and Cursor speak.
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mcp_over_streamable_http(asgi_server, owner, memories, mode):
    paris, theirs = memories
    server = asgi_server()
    token = agent_token_create(owner=owner, name="test agent")[1]

    async def run() -> dict:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with (
            http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http), client_info=AGENT, mode=mode) as c,
        ):
            return await _session(c, paris, theirs)

    session = run_async(run)
    # The link is on the host the client reached (one of ALLOWED_HOSTS).
    assert session["preview"]["confirm_url"] == f"{server.url}/?deletion={session['preview']['deletion']['id']}"
    _check(session, paris, owner)


def test_mcp_over_http_refuses_a_request_without_a_valid_token(asgi_server, owner):
    server = asgi_server()
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    # A person's own API token is no agent token: /mcp takes only those.
    person = f"Bearer {token_create(user=owner)[1]}"

    refused = [
        httpx.post(f"{server.url}/mcp", json=initialize, headers=headers | extra)
        for extra in (
            {},
            {"Authorization": "Bearer not-a-token"},
            {"Authorization": "Basic YTpi"},
            {"Authorization": person},
        )
    ]

    assert [(r.status_code, r.json()["error"]["code"]) for r in refused] == [(401, "not_authenticated")] * 4
    assert refused[0].headers["www-authenticate"] == 'Bearer realm="DeLLM"'


def test_mcp_over_stdio(owner, memories):
    paris, theirs = memories
    token = agent_token_create(owner=owner, name="test agent")[1]
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "dellm_mcp"],
        cwd=str(ROOT),
        env={**os.environ, "DATABASE_URL": helpers.test_database_url(), "DELLM_TOKEN": token},
    )

    async def run() -> dict:
        async with Client(parameters, client_info=AGENT) as client:
            return await _session(client, paris, theirs)

    session = run_async(run)
    assert session["preview"]["confirm_url"].startswith("http://127.0.0.1:8000/?deletion=")
    _check(session, paris, owner)


def test_dellm_mcp_refuses_to_embed_with_another_model_than_the_accounts_vectors(owner, thread, settings):
    import subprocess

    make_message(thread, "I keep bees", embedding=embed_one("I keep bees"))
    token = agent_token_create(owner=owner, name="test agent")[1]
    environment = {**os.environ, "DATABASE_URL": helpers.test_database_url(), "DELLM_TOKEN": token}

    # Started without the server's embedder settings: its model is not the one the memories are in.
    done = subprocess.run(
        [sys.executable, "manage.py", "dellm_mcp"],
        cwd=ROOT,
        env=environment | {"DELLM_EMBEDDING_MODEL": "another-model"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    assert (
        f"This account's memories are embedded with '{settings.DELLM_EMBEDDING_MODEL}', but this process would embed "
        "with 'another-model' (DELLM_EMBEDDER=offline): start dellm_mcp with the server's environment"
    ) in " ".join(done.stderr.split())
    assert done.stdout == ""


def test_dellm_mcp_refuses_a_bad_token(owner):
    import subprocess

    done = subprocess.run(
        [sys.executable, "manage.py", "dellm_mcp"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": helpers.test_database_url(), "DELLM_TOKEN": "nope"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    assert "not a valid DeLLM agent token" in done.stderr
    assert json.dumps(done.stdout) == '""'


def test_mcp_over_http_holds_a_body_to_the_ceiling_and_the_depth_limit(asgi_server, owner):
    server = asgi_server()
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {agent_token_create(owner=owner, name='test agent')[1]}",
    }
    big = b'{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"pad": "' + b"x" * 3_000_000 + b'"}}'

    def chunked():
        # No Content-Length: read as it comes, refused once past the ceiling.
        for start in range(0, len(big), 64 * 1024):
            yield big[start : start + 64 * 1024]

    deep_params = '{"a": ' * 101 + "1" + "}" * 101
    answers = [
        httpx.post(f"{server.url}/mcp", content=body, headers=headers, timeout=60)
        for body in (
            big,
            chunked(),
            b"[" * 100_000,
            # Valid JSON-RPC that the SDK would parse and answer: nested one level past DELLM_JSON_MAX_DEPTH.
            f'{{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {deep_params}}}'.encode(),
        )
    ]

    too_large = ("payload_too_large", "The request body is larger than this server accepts.")
    too_deep = ("malformed_request", "JSON parse error - arrays and objects are nested more than 100 deep.")
    assert [(r.status_code, r.json()["error"]["code"], r.json()["error"]["message"]) for r in answers] == [
        (413, *too_large),
        (413, *too_large),
        (400, *too_deep),
        (400, *too_deep),
    ]


HANDSHAKE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}


def _headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    return headers


def test_mcp_sessions_are_capped_per_user_and_bound_to_the_token_that_opened_them(asgi_server, owner, other_owner):
    server = asgi_server(env={"DELLM_MCP_SESSIONS_PER_USER": "2"})
    mine = agent_token_create(owner=owner, name="mine")[1]
    theirs = agent_token_create(owner=other_owner, name="theirs")[1]
    url = f"{server.url}/mcp"
    opened = [httpx.post(url, json=HANDSHAKE, headers=_headers(mine), timeout=30) for _ in range(3)]
    assert [r.status_code for r in opened] == [200, 200, 429]
    # The SDK's answers and DeLLM's own refusals alike: never stored by a browser or a proxy.
    assert {r.headers["cache-control"] for r in opened} == {"no-store"}
    assert (opened[2].json()["error"]["code"], opened[2].headers["retry-after"]) == ("throttled", "60")
    # One user's sessions do not shut another out.
    assert httpx.post(url, json=HANDSHAKE, headers=_headers(theirs), timeout=30).status_code == 200
    session = opened[0].headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    # Another user's token with my session id is answered as if the session did not exist, and cannot end it.
    foreign = _headers(theirs, session)
    assert httpx.post(url, json=listing, headers=foreign, timeout=30).status_code == 404
    assert httpx.delete(url, headers=foreign, timeout=30).status_code == 404
    # So is another token of mine: a session is bound to the token that opened it.
    other_token_of_mine = agent_token_create(owner=owner, name="second")[1]
    assert httpx.post(url, json=listing, headers=_headers(other_token_of_mine, session), timeout=30).status_code == 404
    # Mine still answers; ending it frees a place.
    assert httpx.post(url, json=listing, headers=_headers(mine, session), timeout=30).status_code == 200
    assert httpx.delete(url, headers=_headers(mine, session), timeout=30).status_code == 200
    assert httpx.post(url, json=HANDSHAKE, headers=_headers(mine), timeout=30).status_code == 200


def test_mcp_session_creation_is_rate_limited_per_user(asgi_server, owner):
    server = asgi_server(env={"DELLM_MCP_SESSION_RATE": "3", "DELLM_MCP_SESSIONS_PER_USER": "100"})
    token = agent_token_create(owner=owner, name="busy")[1]
    answers = [
        httpx.post(f"{server.url}/mcp", json=HANDSHAKE, headers=_headers(token), timeout=30).status_code
        for _ in range(4)
    ]
    assert answers == [200, 200, 200, 429]


def test_a_repeated_mcp_header_is_refused_before_the_session_cap_could_be_bypassed(asgi_server, owner):
    server = asgi_server(env={"DELLM_MCP_SESSIONS_PER_USER": "1"})
    token = agent_token_create(owner=owner, name="tricky")[1]
    url = f"{server.url}/mcp"
    assert httpx.post(url, json=HANDSHAKE, headers=_headers(token), timeout=30).status_code == 200
    # The SDK reads the first of these, a dict the last: a session the cap would not have counted.
    twice = [
        *_headers(token).items(),
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-protocol-version", "2099-01-01"),
    ]
    refused = httpx.post(url, json=HANDSHAKE, headers=twice, timeout=30)
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "malformed_request")
    assert httpx.post(url, json=HANDSHAKE, headers=_headers(token), timeout=30).status_code == 429


LISTEN = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "subscriptions/listen",
    "params": {
        "notifications": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}


def _listen_headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "subscriptions/listen",
    }


def test_listen_streams_count_against_the_session_bounds_and_end_when_idle(asgi_server, owner):
    server = asgi_server(env={"DELLM_MCP_SESSIONS_PER_USER": "2", "DELLM_MCP_SESSION_IDLE_SECONDS": "3"})
    token = agent_token_create(owner=owner, name="listener")[1]
    url = f"{server.url}/mcp"
    with httpx.Client(timeout=30) as client, contextlib.ExitStack() as streams:
        opened = [streams.enter_context(client.stream("POST", url, json=LISTEN, headers=_listen_headers(token)))]
        opened.append(streams.enter_context(client.stream("POST", url, json=LISTEN, headers=_listen_headers(token))))
        assert [r.status_code for r in opened] == [200, 200], opened[0].read()
        assert opened[0].headers["content-type"].startswith("text/event-stream")
        # Two streams open: a third, and a session, wait for one of them to end.
        third = client.post(url, json=LISTEN, headers=_listen_headers(token))
        assert (third.status_code, third.json()["error"]["code"]) == (429, "throttled")
        assert client.post(url, json=HANDSHAKE, headers=_headers(token)).status_code == 429
        # Nothing but pings for DELLM_MCP_SESSION_IDLE_SECONDS: each stream ends, and frees its place.
        started = time.monotonic()
        for response in opened:
            for _ in response.iter_bytes():
                pass
        assert 2 < time.monotonic() - started < 20
    assert httpx.post(url, json=HANDSHAKE, headers=_headers(token), timeout=30).status_code == 200


def test_concurrent_handshakes_open_no_more_sessions_than_the_cap(asgi_server, owner):
    server = asgi_server(env={"DELLM_MCP_SESSIONS_PER_USER": "3", "DELLM_MCP_SESSION_RATE": "100"})
    token = agent_token_create(owner=owner, name="burst")[1]
    url = f"{server.url}/mcp"
    with ThreadPoolExecutor(12) as pool:
        codes = list(
            pool.map(
                lambda _: httpx.post(url, json=HANDSHAKE, headers=_headers(token), timeout=30).status_code, range(12)
            )
        )
    assert sorted(codes) == [200] * 3 + [429] * 9
