from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models import ForeignKey, IntegerField

        from core.db.lookups import ArrayIn, RelatedArrayIn

        IntegerField.register_lookup(ArrayIn)
        ForeignKey.register_lookup(RelatedArrayIn)
