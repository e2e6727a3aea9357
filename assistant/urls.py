from django.urls import path

from assistant import views

urlpatterns = [
    path("threads/<int:thread_id>/messages/", views.ChatView.as_view(), name="thread-chat"),
]
