"""Log records carry ids, never message text (invariant I3: no residue in logs).

DeLLM's own log calls pass ids, counts and codes as arguments, and the tests
prove that no message text reaches any log (tests/provenance/erasure/test_residue_end_to_end.py).
`WithholdText`, on every handler, guards the paths where text could slip in
through code DeLLM does not write, or through a future mistake:

- exceptions: PostgreSQL quotes the failing row in its errors ("Failing row
  contains (...)"), validators quote the bad value. The traceback keeps each
  exception's type, files and lines; its message is withheld, and so is any
  argument that repeats it (Celery's "Task ... raised unexpected: <repr>").
  What an operator needs and no user can put there stays: a database error's
  SQLSTATE code and the names of the schema objects involved (constraint,
  table, column), and the whole message of an error raised while connecting
  (libpq's "too many clients", "connection refused": no query, no data).
- request lines (development server, uvicorn's access log): the query string
  can carry a search or a deletion phrase.
- arguments of DeLLM's own loggers that are not ids, numbers or one-word codes.
"""

import logging
import re
import traceback
from typing import Any

APP_LOGGERS = ("chat", "provenance", "dellm_site")
WITHHELD = "[withheld]"
_WORD = re.compile(r"[\w.:/@-]{0,64}", re.ASCII)
_QUERY_STRING = re.compile(r"\?\S*")
REQUEST_LINE_LOGGERS = ("django.server", "django.request", "uvicorn.access", "uvicorn.error")
# psycopg's diagnostics that name schema objects (never row data).
_DIAG_NAMES = ("constraint_name", "table_name", "column_name", "schema_name")


def _is_id_like(value: object) -> bool:
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return bool(_WORD.fullmatch(value))
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_is_id_like(item) for item in value)
    return False


def _chain(exc: BaseException | None) -> list[BaseException]:
    """The exception and its causes and contexts, innermost last, each once."""
    chain: list[BaseException] = []
    while exc is not None and all(exc is not seen for seen in chain):
        chain.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return chain


def _database_error(exc: BaseException) -> BaseException | None:
    """The psycopg error behind `exc` (Django wraps it as __cause__), if any."""
    for link in _chain(exc):
        if type(link).__module__.split(".")[0] == "psycopg" and hasattr(link, "sqlstate"):
            return link
    return None


def safe_summary(exc: BaseException) -> str:
    """What of an exception's message can be logged: `[withheld]`, plus what carries no user text."""
    error = _database_error(exc)
    if error is None:
        return WITHHELD
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate is None:
        # Raised by libpq while connecting or talking to the server, not by a
        # statement: the message names hosts and server states, never data.
        return " ".join(str(error).split())[:500]
    diag = getattr(error, "diag", None)
    names = [f"{name.removesuffix('_name')}={value}" for name in _DIAG_NAMES if (value := getattr(diag, name, None))]
    return f"{WITHHELD} (SQLSTATE {sqlstate}{''.join(', ' + part for part in names)})"


def withheld_traceback(exc: BaseException) -> str:
    parts = []
    summary = safe_summary(exc)
    for link in reversed(_chain(exc)):
        kind = f"{type(link).__module__}.{type(link).__qualname__}"
        frames = "".join(traceback.format_tb(link.__traceback__))
        parts.append(f"Traceback (most recent call last):\n{frames}{kind}: {summary}")
    return "\n\nwhich led to:\n\n".join(parts)


class WithholdText(logging.Filter):
    """Rewrites records in place, so every handler after it sees the redacted record; drops none."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        quoted = {text for link in _chain(exc) for text in (str(link), repr(link)) if len(text) >= 4}
        summary = safe_summary(exc) if exc is not None else WITHHELD
        own = record.name.split(".")[0] in APP_LOGGERS
        is_request_line = record.name in REQUEST_LINE_LOGGERS

        def scrub(value: object) -> object:
            if isinstance(value, BaseException):
                return f"{type(value).__module__}.{type(value).__qualname__}: {safe_summary(value)}"
            if isinstance(value, str) and any(text in value for text in quoted):
                return summary
            if own and not _is_id_like(value):
                return WITHHELD
            if is_request_line and isinstance(value, str):
                return _QUERY_STRING.sub("?" + WITHHELD, value)
            return value

        if own and not isinstance(record.msg, str):
            record.msg = WITHHELD
        elif isinstance(record.msg, str) and any(text in record.msg for text in quoted):
            # Django's security logger logs str(exc) itself as the message
            # ("Invalid HTTP_HOST header: '<what the client sent>'").
            record.msg, record.args = summary, ()
        if isinstance(record.args, dict):
            record.args = {key: scrub(value) for key, value in record.args.items()}
        elif record.args:
            record.args = tuple(scrub(value) for value in record.args)
        if isinstance(getattr(record, "data", None), dict):
            # Celery repeats its log arguments, exception text included, as `extra={"data": ...}`.
            record.data = {key: scrub(value) for key, value in record.data.items()}  # type: ignore[attr-defined]
        if exc is not None:
            record.exc_text = withheld_traceback(exc)
            record.exc_info = None
        return True


# Logs carry ids, never message text (I3); core/logs.py withholds
# exception messages (keeping class, SQLSTATE, object names), query strings and
# non-id arguments of our own loggers. One handler, always filtered: Django's
# default handlers (`console` when DEBUG, `django.server`'s unfiltered access
# log, `mail_admins` with request bodies) are replaced by naming their loggers
# here; uvicorn's loggers likewise (Django configures logging after uvicorn).
def logging_config(*, level: str) -> dict[str, Any]:
    """The `LOGGING` setting: every handler filtered by `WithholdText`, the root at `level`."""
    filtered = {"handlers": ["console"], "level": "INFO", "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"withhold_text": {"()": "core.logs.WithholdText"}},
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["withhold_text"]},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django": filtered,
            "django.server": filtered,
            "uvicorn": filtered,
            "uvicorn.error": filtered,
            "uvicorn.access": filtered,
            # redis-py gives this logger its own unfiltered handler; pub/sub messages
            # (streamed reply tokens) would pass through it at DEBUG.
            "push_response": {"handlers": ["console"], "level": "WARNING", "propagate": False},
            # httpx logs request lines only, but keep third-party chatter down.
            **{name: {"level": "WARNING"} for name in ("httpx", "openai", "pgserver")},
            # At DEBUG (with DEBUG=True) Django logs every SQL statement with its
            # parameters, message text included: never below INFO.
            "django.db.backends": {"level": "INFO"},
        },
    }
