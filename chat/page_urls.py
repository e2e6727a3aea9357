from django.urls import path

from chat import pages

urlpatterns = [
    path("", pages.ChatPage.as_view(), name="chat"),
    path("graph/", pages.GraphPage.as_view(), name="graph-page"),
    path("deletions/", pages.DeletionsPage.as_view(), name="deletions-page"),
    path("import/", pages.ImportPage.as_view(), name="import-page"),
    path("facts/", pages.FactsPage.as_view(), name="facts-page"),
]
