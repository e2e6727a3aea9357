from django.urls import path

from assistant import chat_view
from assistant.mcp import token_views

urlpatterns = [
    path("threads/<int:thread_id>/messages/", chat_view.ChatView.as_view(), name="thread-chat"),
    path("agent-tokens/", token_views.AgentTokenListView.as_view(), name="agent-token-list"),
    path("agent-tokens/<int:token_id>/", token_views.AgentTokenDetailView.as_view(), name="agent-token-detail"),
]
