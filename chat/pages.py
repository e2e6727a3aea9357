"""The browser app's pages. Each is a template that loads its ES module; data comes from the JSON API."""

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.views.generic import TemplateView

from chat.llm import get_responder


class AppPage(LoginRequiredMixin, TemplateView):
    """A signed-in page: the header names the user and the model answering."""

    nav = ""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(nav=self.nav, responder=get_responder().name, **kwargs)


class ChatPage(AppPage):
    template_name = "chat.html"
    nav = "chat"


class GraphPage(AppPage):
    template_name = "graph.html"
    nav = "graph"


class DeletionsPage(AppPage):
    template_name = "deletions.html"
    nav = "deletions"


class ImportPage(AppPage):
    template_name = "imports.html"
    nav = "imports"


class FactsPage(AppPage):
    template_name = "facts.html"
    nav = "facts"
