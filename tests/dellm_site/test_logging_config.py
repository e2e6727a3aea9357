"""Logs keep what an operator needs and nothing a user wrote, through the real LOGGING."""

import logging
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from django.db import IntegrityError, connection
from django.utils.log import AdminEmailHandler

from core.auth.tokens import token_create
from core.logs import WithholdText
from tests.factories import make_message, make_thread, make_user
from tests.helpers import ROOT

BASE_DIR = ROOT
SECRET = "Zanzibar-4471 quokka"
SECRET_WORDS = ("Zanzibar", "quokka")


def _configured_handlers() -> list[tuple[str, logging.Handler]]:
    """Every handler of every logger, as settings.LOGGING left them (pytest's own capture left out)."""
    loggers = [logging.getLogger()] + [
        logger for logger in logging.root.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    return [
        (logger.name, handler)
        for logger in loggers
        for handler in logger.handlers
        # pytest's capture, and handlers that write nothing
        if not type(handler).__module__.startswith("_pytest") and not isinstance(handler, logging.NullHandler)
    ]


def test_every_handler_of_every_logger_withholds_text():
    handlers = _configured_handlers()
    assert handlers
    unfiltered = [name for name, h in handlers if not any(isinstance(f, WithholdText) for f in h.filters)]
    assert unfiltered == []
    assert [name for name, h in handlers if isinstance(h, AdminEmailHandler)] == []
    for name in ("django", "django.server", "django.request", "uvicorn.access"):
        logger = logging.getLogger(name)
        while logger and not logger.handlers:
            logger = logger.parent if logger.propagate else None
        assert logger is not None, name


def _run_logging(code: str, env: dict[str, str] | None = None) -> str:
    """Runs `code` after django.setup() in a fresh process (the real LOGGING); returns what it logged."""
    program = "import django, logging; django.setup()\n" + code
    result = subprocess.run(
        [sys.executable, "-c", program],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "dellm_site.settings", **(env or {})},
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + result.stderr


def test_database_errors_keep_sqlstate_and_names_but_not_the_row(db):
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE residue_probe (note text, n int NOT NULL)")
        with pytest.raises(IntegrityError) as caught:
            cursor.execute("INSERT INTO residue_probe VALUES (%s, NULL)", [SECRET])
    assert SECRET in str(caught.value)  # PostgreSQL quotes the failing row
    record = logging.LogRecord("celery.app.trace", logging.ERROR, __file__, 1, "Task %s raised: %r", None, None)
    record.args = ("chat.turn_run", caught.value)
    record.exc_info = (IntegrityError, caught.value, caught.value.__traceback__)
    WithholdText().filter(record)
    text = record.getMessage() + "\n" + record.exc_text
    assert not any(word in text for word in SECRET_WORDS)
    assert (
        "psycopg.errors.NotNullViolation: [withheld] (SQLSTATE 23502, table=residue_probe, column=n, schema=pg_temp"
        in text
    )
    assert (
        "django.db.utils.IntegrityError: [withheld] (SQLSTATE 23502, table=residue_probe, column=n, schema=pg_temp"
        in text
    )


def test_connection_errors_are_logged_whole_through_the_real_configuration():
    logged = _run_logging(
        "import psycopg\n"
        "from django.db.utils import OperationalError\n"
        "try:\n"
        "    try:\n"
        "        psycopg.connect('host=127.0.0.1 port=9 dbname=x user=x connect_timeout=2')\n"
        "    except psycopg.OperationalError as exc:\n"
        "        raise OperationalError(*exc.args) from exc\n"
        "except OperationalError:\n"
        "    logging.getLogger('chat.turns.tasks').exception('turn %s failed', 42)\n"
    )
    assert "chat.turns.tasks turn 42 failed" in logged
    assert "django.db.utils.OperationalError: connection failed" in logged
    assert "[withheld]" not in logged.split("turn 42 failed", 1)[1]


def test_django_default_handlers_are_gone_in_development_too():
    # DEBUG turns on Django's own `console` handler, which printed unfiltered exceptions.
    logged = _run_logging(
        f"try:\n    raise ValueError({SECRET!r})\n"
        "except ValueError as exc:\n"
        "    logging.getLogger('django.request').error('Internal Server Error: %s', '/api/x', exc_info=exc)\n"
        f"    logging.getLogger('django.security.DisallowedHost').error(str(exc), exc_info=exc)\n",
        env={"DJANGO_DEBUG": "true", "DELLM_LOG_LEVEL": "INFO"},
    )
    assert "Internal Server Error: /api/x" in logged
    assert logged.count("builtins.ValueError: [withheld]") == 2
    assert not any(word in logged for word in SECRET_WORDS)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgresql://{db['USER']}:{db['PASSWORD'] or ''}@/{db['NAME']}?host={db['HOST']}&port={db['PORT'] or 5432}"


def test_a_real_server_logs_requests_without_query_strings_or_text(transactional_db):
    owner = make_user("alice")
    make_message(make_thread(owner), SECRET)
    token = token_create(user=owner)[1]
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": _database_url(), "DJANGO_DEBUG": "true", "DELLM_LOG_LEVEL": "INFO"}
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        env=env,
        cwd=BASE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Token {token}"}) as client:
            for _ in range(100):
                try:
                    client.get("/accounts/login/")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            assert client.get("/api/messages/", params={"q": SECRET, "status": "all"}).status_code == 200
            assert client.get("/api/nowhere/", params={"q": SECRET}).status_code == 404
            assert client.get("/", headers={"Host": "zanzibar-4471.quokka"}).status_code == 400
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert '"GET /api/messages/?[withheld] HTTP/1.1" 200' in output
    assert '"GET /api/nowhere/?[withheld] HTTP/1.1" 404' in output
    assert "django.security.DisallowedHost [withheld]" in output
    assert not any(word.lower() in output.lower() for word in SECRET_WORDS), output
