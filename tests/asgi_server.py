"""DeLLM's ASGI application served by uvicorn on a thread of the test process.

pytest-django's `live_server` is a threaded WSGI server; the endpoints that
wait asynchronously need an ASGI server to be exercised as they run in
production. In-process, the server uses the test database like `live_server`.
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from django.db import connections


@contextmanager
def asgi_server() -> Iterator[str]:
    """Serve `dellm_site.asgi:application` on a free port; yields its base URL.

    Django runs each ASGI request's database work on a thread of its own, so a
    persistent connection would outlive its thread (and block the test
    database's teardown): connections close at the end of each request here.
    """
    settings_dict = connections.settings["default"]
    max_age = settings_dict["CONN_MAX_AGE"]
    settings_dict["CONN_MAX_AGE"] = 0
    # log_config=None: keep the project's logging (every handler filtered, sec-hardening's
    # dellm_site/logging.py) instead of uvicorn's defaults, in this process shared by later tests.
    config = uvicorn.Config(
        "dellm_site.asgi:application", host="127.0.0.1", port=0, log_level="warning", lifespan="off", log_config=None
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        settings_dict["CONN_MAX_AGE"] = max_age
