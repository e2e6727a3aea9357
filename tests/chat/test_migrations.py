"""The layering rule for models and migrations: chat records and never depends on provenance (or any other app)."""

from django.apps import apps
from django.db.migrations.loader import MigrationLoader

# What chat may depend on: itself and Django's own apps (the user model).
ALLOWED = {"chat", "auth", "contenttypes", "__setting__"}


def test_chat_migrations_depend_only_on_chat_and_django():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    outside = sorted(
        (name, dependency)
        for (app, name), migration in loader.disk_migrations.items()
        if app == "chat"
        for dependency, _ in migration.dependencies
        if dependency not in ALLOWED
    )
    assert outside == []


def test_chat_models_relate_only_to_chat_and_django():
    outside = sorted(
        (model.__name__, field.name, field.related_model._meta.app_label)
        for model in apps.get_app_config("chat").get_models()
        for field in model._meta.get_fields()
        if field.is_relation and not field.auto_created and field.related_model is not None
        if field.related_model._meta.app_label not in ALLOWED
    )
    assert outside == []
