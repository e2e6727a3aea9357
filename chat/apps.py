from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models import IntegerField

        from dellm_site.lookups import ArrayIn

        IntegerField.register_lookup(ArrayIn)
