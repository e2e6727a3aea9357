import io
import logging

import pytest
from django.db import connection

from core.logs import WITHHELD, WithholdText

SECRET = "my tortoise is called Zanzibar-4471"


@pytest.fixture
def captured():
    """A handler like the console one of settings.LOGGING, writing to a string."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(WithholdText())
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    loggers = [logging.getLogger(name) for name in ("chat.turns.run", "celery.app.trace", "django.server", "x")]
    for logger in loggers:
        logger.addHandler(handler)
    yield stream
    for logger in loggers:
        logger.removeHandler(handler)


def test_the_console_handler_withholds_text():
    filters = [f for handler in logging.getLogger().handlers for f in handler.filters]
    assert any(isinstance(f, WithholdText) for f in filters)


def test_exception_messages_are_withheld_but_not_their_place(captured):
    try:
        try:
            raise ValueError(f"Failing row contains ({SECRET})")
        except ValueError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError:
        logging.getLogger("x").exception("turn %s failed", 7)
    text = captured.getvalue()
    assert "Zanzibar" not in text
    assert "x turn 7 failed" in text
    assert f"builtins.ValueError: {WITHHELD}" in text and f"builtins.RuntimeError: {WITHHELD}" in text
    assert "tests/core/test_logs.py" in text


def test_celery_failure_lines_do_not_repeat_the_exception(captured):
    error = ValueError(f"DETAIL: {SECRET}")
    context = {"name": "chat.turn_run", "id": "abc", "description": "raised unexpected", "exc": repr(error)}
    logging.getLogger("celery.app.trace").error(
        "Task %(name)s[%(id)s] %(description)s: %(exc)s",
        context,
        exc_info=(ValueError, error, None),
        extra={"data": dict(context)},
    )
    assert captured.getvalue().startswith(f"celery.app.trace Task chat.turn_run[abc] raised unexpected: {WITHHELD}")
    assert "Zanzibar" not in captured.getvalue()


def test_own_loggers_keep_ids_and_codes_and_withhold_text(captured):
    logging.getLogger("chat.turns.run").info("turn %s: %s, ids %s, text %s", 12, "upstream_error", [1, 2], SECRET)
    assert captured.getvalue() == f"chat.turns.run turn 12: upstream_error, ids [1, 2], text {WITHHELD}\n"


def test_request_lines_lose_their_query_string(captured):
    logging.getLogger("django.server").info('"%s" %s %s', "GET /api/messages/?q=Zanzibar HTTP/1.1", "200", "12")
    assert captured.getvalue() == f'django.server "GET /api/messages/?{WITHHELD} HTTP/1.1" 200 12\n'


def test_sql_is_never_logged_even_in_debug(settings, caplog, db):
    settings.DEBUG = True
    caplog.set_level(logging.DEBUG)
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s", [SECRET])
    assert [record for record in caplog.records if record.name.startswith("django.db")] == []
