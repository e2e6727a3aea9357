"""What the doors keep of their own: the tokens agents hold (the MCP door's credentials)."""

from django.conf import settings
from django.db import models
from django.utils import timezone
from knox.models import AuthToken


class AgentToken(models.Model):
    """An API token made for an agent (an MCP client): it opens `/mcp` and nothing else.

    Its user makes it in the web app, names it after the client and revokes it there. The secret is
    knox's (a digest stored, shown once); this row says the token is an agent's, so the REST API,
    `/v1` and the streams refuse it, and `/mcp` refuses every other token.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_tokens")
    token = models.OneToOneField(AuthToken, on_delete=models.CASCADE, related_name="agent")
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"Agent token {self.pk} of user {self.owner_id}"
