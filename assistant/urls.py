from django.urls import path

from assistant import chat_view

urlpatterns = [
    path("threads/<int:thread_id>/messages/", chat_view.ChatView.as_view(), name="thread-chat"),
]
