from django.urls import path

from provenance import views

urlpatterns = [
    path("messages/<int:message_id>/dependents/", views.DependentsView.as_view(), name="message-dependents"),
    path(
        "messages/<int:message_id>/dependents/<int:dependent_id>/",
        views.DependentPathView.as_view(),
        name="message-dependent-path",
    ),
    path("graph/", views.GraphView.as_view(), name="graph"),
    path("graph/find/", views.GraphFindView.as_view(), name="graph-find"),
    path("deletions/", views.DeletionListView.as_view(), name="deletion-list"),
    path("deletions/<int:deletion_id>/", views.DeletionDetailView.as_view(), name="deletion-detail"),
    path("deletions/<int:deletion_id>/confirm/", views.DeletionConfirmView.as_view(), name="deletion-confirm"),
    path("deletions/<int:deletion_id>/cancel/", views.DeletionCancelView.as_view(), name="deletion-cancel"),
    path("deletions/<int:deletion_id>/undo/", views.DeletionUndoView.as_view(), name="deletion-undo"),
    path("deletions/<int:deletion_id>/resume/", views.DeletionResumeView.as_view(), name="deletion-resume"),
    path("export/", views.ExportView.as_view(), name="export"),
]
