"""`manage.py dellm_mcp`: DeLLM's MCP server over stdio, for one user (README, "Connect an agent (MCP)").

The user is the owner of a DeLLM API token, `--token` or the environment's
`DELLM_TOKEN` (the environment is the better place: a command line is visible
to every user of the machine). The token is checked once, at start; the
server then acts for that user until the client closes stdin. Log lines go
to stderr (stdout is the protocol).
"""

import os
from typing import Any

import anyio
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from assistant.mcp_server import build_server, token_user


class Command(BaseCommand):
    help = "Serve DeLLM's MCP tools over stdio for the user whose API token is given (--token or DELLM_TOKEN)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--token", default="", help="A DeLLM API token (default: the DELLM_TOKEN variable).")
        parser.add_argument(
            "--url", default="", help="Base of the confirmation links `forget` answers with (default DELLM_PUBLIC_URL)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        token = options["token"] or os.environ.get("DELLM_TOKEN", "")
        if not token:
            raise CommandError("Give a DeLLM API token: --token <token> or the DELLM_TOKEN variable.")
        user_id = token_user(b"Bearer " + token.encode())
        if user_id is None:
            raise CommandError("This token is not a valid DeLLM API token (expired, revoked or mistyped).")
        server = build_server(user_id=user_id, base_url=options["url"] or settings.DELLM_PUBLIC_URL)
        anyio.run(server.run_stdio_async)
