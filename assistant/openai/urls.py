"""`/v1/`: the OpenAI-compatible endpoint (assistant/chat_view.py)."""

from django.urls import path, re_path

from assistant.openai import views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="v1-chat-completions"),
    path("models", views.models, name="v1-models"),
    path("models/<path:model_id>", views.model_detail, name="v1-model-detail"),
    # OpenAI's error shape for every other address under /v1/ too.
    re_path(r"^.*$", views.not_found, name="v1-not-found"),
]
