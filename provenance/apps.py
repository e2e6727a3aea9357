from django.apps import AppConfig


class ProvenanceConfig(AppConfig):
    name = "provenance"
    default_auto_field = "django.db.models.BigAutoField"
