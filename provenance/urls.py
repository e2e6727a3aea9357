from django.urls import path

from provenance.api.views.account import AccountEraseView, AccountView
from provenance.api.views.deletions import (
    DeletionCancelView,
    DeletionConfirmView,
    DeletionDetailView,
    DeletionListView,
    DeletionResumeView,
    DeletionUndoView,
)
from provenance.api.views.dependents import DependentPathView, DependentsView
from provenance.api.views.export import ExportView
from provenance.api.views.facts import (
    FactApproveView,
    FactCorrectView,
    FactDeclineView,
    FactDetailView,
    FactListView,
    FactProgressView,
)
from provenance.api.views.graph import GraphFindView, GraphView

urlpatterns = [
    path("messages/<int:message_id>/dependents/", DependentsView.as_view(), name="message-dependents"),
    path(
        "messages/<int:message_id>/dependents/<int:dependent_id>/",
        DependentPathView.as_view(),
        name="message-dependent-path",
    ),
    path("graph/", GraphView.as_view(), name="graph"),
    path("graph/find/", GraphFindView.as_view(), name="graph-find"),
    path("deletions/", DeletionListView.as_view(), name="deletion-list"),
    path("deletions/<int:deletion_id>/", DeletionDetailView.as_view(), name="deletion-detail"),
    path("deletions/<int:deletion_id>/confirm/", DeletionConfirmView.as_view(), name="deletion-confirm"),
    path("deletions/<int:deletion_id>/cancel/", DeletionCancelView.as_view(), name="deletion-cancel"),
    path("deletions/<int:deletion_id>/undo/", DeletionUndoView.as_view(), name="deletion-undo"),
    path("deletions/<int:deletion_id>/resume/", DeletionResumeView.as_view(), name="deletion-resume"),
    path("facts/", FactListView.as_view(), name="fact-list"),
    path("facts/progress/", FactProgressView.as_view(), name="fact-progress"),
    path("facts/<int:fact_id>/", FactDetailView.as_view(), name="fact-detail"),
    path("facts/<int:fact_id>/approve/", FactApproveView.as_view(), name="fact-approve"),
    path("facts/<int:fact_id>/decline/", FactDeclineView.as_view(), name="fact-decline"),
    path("facts/<int:fact_id>/correct/", FactCorrectView.as_view(), name="fact-correct"),
    path("export/", ExportView.as_view(), name="export"),
    path("account/", AccountView.as_view(), name="account"),
    path("account/erase/", AccountEraseView.as_view(), name="account-erase"),
]
