"""Log records carry ids, never message text (invariant I3: no residue in logs).

DeLLM's own log calls pass ids, counts and codes as arguments, and the tests
prove that no message text reaches any log (tests/admin/test_residue.py).
`WithholdText`, on every handler, guards the paths where text could slip in
through code DeLLM does not write, or through a future mistake:

- exceptions: PostgreSQL quotes the failing row in its errors ("Failing row
  contains (...)"), validators quote the bad value. The traceback keeps each
  exception's type, files and lines; its message is withheld, and so is any
  argument that repeats it (Celery's "Task ... raised unexpected: <repr>").
- request lines (development server, access logs): the query string can carry
  a search or a deletion phrase.
- arguments of DeLLM's own loggers that are not ids, numbers or one-word codes.
"""

import logging
import re
import traceback

APP_LOGGERS = ("chat", "provenance", "dellm_site")
WITHHELD = "[withheld]"
_WORD = re.compile(r"[\w.:/@-]{0,64}", re.ASCII)
_QUERY_STRING = re.compile(r"\?\S*")


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


def withheld_traceback(exc: BaseException) -> str:
    parts = []
    for link in reversed(_chain(exc)):
        kind = f"{type(link).__module__}.{type(link).__qualname__}"
        frames = "".join(traceback.format_tb(link.__traceback__))
        parts.append(f"Traceback (most recent call last):\n{frames}{kind}: {WITHHELD}")
    return "\n\nwhich led to:\n\n".join(parts)


class WithholdText(logging.Filter):
    """Rewrites records in place, so every handler after it sees the redacted record; drops none."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        quoted = {text for link in _chain(exc) for text in (str(link), repr(link)) if len(text) >= 4}
        own = record.name.split(".")[0] in APP_LOGGERS
        is_request_line = record.name in ("django.server", "django.request")

        def scrub(value: object) -> object:
            if isinstance(value, str) and any(text in value for text in quoted):
                return WITHHELD
            if own and not _is_id_like(value):
                return WITHHELD
            if is_request_line and isinstance(value, str):
                return _QUERY_STRING.sub("?" + WITHHELD, value)
            return value

        if own and not isinstance(record.msg, str):
            record.msg = WITHHELD
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
