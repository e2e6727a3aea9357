from django.apps import AppConfig


class AssistantConfig(AppConfig):
    """The doors that compose recording (chat) and forgetting (provenance): the chat endpoint and `/v1`."""

    name = "assistant"
    default_auto_field = "django.db.models.BigAutoField"
