"""uvicorn serves the whole app (pages, API, static files under DEBUG), as `make run` does."""

import httpx
import pytest

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_uvicorn_serves_pages_api_errors_and_static_files(asgi_server):
    server = asgi_server()
    login = httpx.get(f"{server.url}/accounts/login/")
    api = httpx.get(f"{server.url}/api/threads/")
    css = httpx.get(f"{server.url}/static/css/app.css")

    assert login.status_code == 200
    assert "Content-Security-Policy" in login.headers
    assert (api.status_code, api.json()["error"]["code"]) == (401, "not_authenticated")
    assert (css.status_code, css.headers["content-type"].split(";")[0]) == (200, "text/css")
