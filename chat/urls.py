from django.urls import path

from chat import views
from chat.imports import views as import_views
from chat.turns import stream_view

urlpatterns = [
    path("threads/", views.ThreadListView.as_view(), name="thread-list"),
    path("threads/<int:thread_id>/", views.ThreadDetailView.as_view(), name="thread-detail"),
    path("turns/<int:turn_id>/", views.TurnDetailView.as_view(), name="turn-detail"),
    path("turns/<int:turn_id>/events/", stream_view.turn_events, name="turn-events"),
    path("turns/<int:turn_id>/retry/", views.TurnRetryView.as_view(), name="turn-retry"),
    path("messages/", views.MessageListView.as_view(), name="message-list"),
    path("messages/<int:message_id>/", views.MessageDetailView.as_view(), name="message-detail"),
    path("agent-access/", views.AgentAccessView.as_view(), name="agent-access"),
    path("imports/", import_views.ImportListView.as_view(), name="import-list"),
    path("imports/<int:job_id>/", import_views.ImportDetailView.as_view(), name="import-detail"),
    path("imports/<int:job_id>/events/", import_views.import_events, name="import-events"),
]
