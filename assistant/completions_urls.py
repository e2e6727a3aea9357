"""`/v1/`: the OpenAI-compatible endpoint (assistant/completions_views.py)."""

from django.urls import path, re_path

from assistant import completions_views

urlpatterns = [
    path("chat/completions", completions_views.chat_completions, name="v1-chat-completions"),
    path("models", completions_views.models, name="v1-models"),
    path("models/<path:model_id>", completions_views.model_detail, name="v1-model-detail"),
    # OpenAI's error shape for every other address under /v1/ too.
    re_path(r"^.*$", completions_views.not_found, name="v1-not-found"),
]
