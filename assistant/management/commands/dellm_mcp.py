"""`manage.py dellm_mcp`: DeLLM's MCP server over stdio, for one user (README, "Connect an agent (MCP)").

The user is the owner of a DeLLM agent token, `--token` or the environment's
`DELLM_TOKEN` (the environment is the better place: a command line is visible
to every user of the machine). The token is checked once, at start; the
server then acts for that user until the client closes stdin. Log lines go
to stderr (stdout is the protocol).

It must run with the server's whole environment (README, "Connect an agent
(MCP)"): without its REDIS_URL it would start an embedded Redis of its own
(separate throttles, and tasks no worker reads), and without its embedder
settings it would embed with the offline model, in another vector space than
the stored memories. That one it checks: it refuses to start when the
account's newest vector is of another model than the one it would embed with.
"""

import os
from typing import Any

import anyio
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.mcp.server import build_server, token_user
from chat.selectors import embedding_model_latest


class Command(BaseCommand):
    help = "Serve DeLLM's MCP tools over stdio for the user whose agent token is given (--token or DELLM_TOKEN)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--token", default="", help="A DeLLM agent token (default: the DELLM_TOKEN variable).")
        parser.add_argument(
            "--url", default="", help="Base of the confirmation links `forget` answers with (default DELLM_PUBLIC_URL)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        token = options["token"] or os.environ.get("DELLM_TOKEN", "")
        if not token:
            raise CommandError("Give a DeLLM agent token: --token <token> or the DELLM_TOKEN variable.")
        user_id = token_user(b"Bearer " + token.encode())
        if user_id is None:
            raise CommandError("This is not a valid DeLLM agent token (revoked, mistyped, or a person's API token).")
        stored = embedding_model_latest(owner_id=user_id)
        if stored and stored != settings.DELLM_EMBEDDING_MODEL:
            raise CommandError(
                f"This account's memories are embedded with {stored!r}, but this process would embed with "
                f"{settings.DELLM_EMBEDDING_MODEL!r} (DELLM_EMBEDDER={settings.DELLM_EMBEDDER}): start dellm_mcp "
                "with the server's environment (its .env: DELLM_EMBEDDER, DELLM_EMBEDDING_MODEL, OPENAI_API_KEY, "
                "OPENAI_BASE_URL, REDIS_URL, ...). After switching embedders, run `manage.py reembed --only-stale`."
            )
        server = build_server(user_id=user_id, base_url=options["url"] or settings.DELLM_PUBLIC_URL)
        anyio.run(server.run_stdio_async)
