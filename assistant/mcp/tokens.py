"""Agent tokens: the credential an MCP client holds, which opens `/mcp` and nothing else.

An agent with the user's full API token could grant itself the right to confirm deletions
(`PUT /api/agent-access/`), confirm them through the REST API, or read every memory there with no
read logged. So `/mcp` takes agent tokens only, every other door refuses them
(`PersonTokenAuthentication` is the REST API's, `/v1`'s and the streams' token authentication),
and the user makes and revokes them (docs/API.md, "Agent tokens"; docs/SECURITY.md).
"""

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet
from knox.models import AuthToken
from rest_framework import exceptions

from assistant.models import AgentToken
from core.auth.tokens import TokenAuthentication
from core.errors import Conflict, NotFound, ValidationFailed
from core.types import User

NAME_MAX = int(AgentToken._meta.get_field("name").max_length or 0)


class AgentTokenRefused(exceptions.PermissionDenied):
    error_code = "agent_token"
    default_detail = "This is an agent token: it opens /mcp only. Use your own API token or the web app."


class PersonTokenAuthentication(TokenAuthentication):
    """A person's API token (`Token` or `Bearer`); an agent token is refused with 403 `agent_token`.

    A token made at sign-in always expires (knox's TOKEN_TTL is always set) and an agent's never
    does, so the token row in hand tells them apart with no query of its own on every request;
    a token without an expiry is refused here whatever made it (closed, not open).
    """

    def authenticate_credentials(self, token: bytes) -> tuple[Any, AuthToken]:
        user, auth_token = super().authenticate_credentials(token)
        if auth_token.expiry is None:
            raise AgentTokenRefused()
        return user, auth_token


class AgentTokenAuthentication(TokenAuthentication):
    """An agent token, for `/mcp`; a person's API token is refused there."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, AuthToken]:
        user, auth_token = super().authenticate_credentials(token)
        if auth_token.expiry is not None or not AgentToken.objects.filter(token_id=auth_token.pk).exists():
            raise exceptions.AuthenticationFailed("/mcp takes an agent token: make one in the web app.")
        return user, auth_token


def agent_token_list(*, owner: User) -> QuerySet[AgentToken]:
    return AgentToken.objects.filter(owner=owner).order_by("-created_at", "-pk")


def agent_token_create(*, owner: User, name: object) -> tuple[AgentToken, str]:
    """A new agent token named `name` (the client's, for the user's eyes): the row and the only copy of its secret.

    It never expires by itself (an MCP client's configuration holds it); the user revokes it, and a
    password change revokes it with every other token. At most DELLM_AGENT_TOKEN_LIMIT per user.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValidationFailed("Name the agent this token is for.", fields={"name": "empty"})
    if len(name.strip()) > NAME_MAX:
        raise ValidationFailed(f"A name of at most {NAME_MAX} characters.", fields={"name": "too long"})
    with transaction.atomic():
        # Two creations at once cannot both pass the limit: the user's row is locked while one counts.
        get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
        if AgentToken.objects.filter(owner=owner).count() >= settings.DELLM_AGENT_TOKEN_LIMIT:
            raise Conflict(f"At most {settings.DELLM_AGENT_TOKEN_LIMIT} agent tokens: revoke one first.")
        auth_token, secret = AuthToken.objects.create(user=owner, expiry=None)
        return AgentToken.objects.create(owner=owner, token=auth_token, name=name.strip()), secret


def agent_token_revoke(*, owner_id: int, token_id: int) -> None:
    """Revoke one of the user's agent tokens: its knox token goes, and every later request with it is refused."""
    agent = AgentToken.objects.filter(owner_id=owner_id, pk=token_id).first()
    if agent is None:
        raise NotFound(f"No agent token with id {token_id}.")
    AuthToken.objects.filter(pk=agent.token_id).delete()  # the agent row goes with it (cascade)
