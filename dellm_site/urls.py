from django.contrib import admin
from django.urls import include, path
from drf_spectacular.renderers import OpenApiJsonRenderer, OpenApiJsonRenderer2, OpenApiYamlRenderer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from core.auth.views import LogoutAllView, LogoutView, TokenView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/auth/token/", TokenView.as_view(), name="api-token"),
    path("api/auth/logout/", LogoutView.as_view(), name="api-logout"),
    path("api/auth/logoutall/", LogoutAllView.as_view(), name="api-logout-all"),
    # JSON first (`?format=yaml` for YAML), so errors here are JSON like everywhere else.
    path(
        "api/schema/",
        SpectacularAPIView.as_view(renderer_classes=[OpenApiJsonRenderer, OpenApiJsonRenderer2, OpenApiYamlRenderer]),
        name="api-schema",
    ),
    # The split view serves its start-up script as a file, so the page keeps the
    # Content-Security-Policy (core/middleware.py); the template drops the inline <style>.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api/docs.html"),
        name="api-docs",
    ),
    path("api/", include("assistant.urls")),
    path("api/", include("chat.urls")),
    path("api/", include("provenance.urls")),
    # OpenAI-compatible: clients are given http://host/v1 as their base URL.
    path("v1/", include("assistant.openai.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("chat.page_urls")),
]

# JSON errors for /api/ paths, Django's pages elsewhere (core/api/handler.py).
handler404 = "core.api.handler.handler404"
handler500 = "core.api.handler.handler500"
