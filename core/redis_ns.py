"""One Redis, several DeLLM instances: every key and channel carries the instance's prefix.

Without a prefix, two instances pointed at one Redis share the queue `dellm`,
and the worker of one runs the other's tasks against its own database, where
the same turn id means something else. The prefix defaults to a digest of the
database the instance uses, so instances with different databases differ
without configuration, and every process of one instance (web, worker, beat,
a test's worker) agrees on it. Read by `settings.py` before Django is set up.
"""

import hashlib
import os
import re
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.core.exceptions import ImproperlyConfigured

_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def instance_prefix(database: Mapping[str, Any]) -> str:
    """`DELLM_REDIS_PREFIX`, else `dellm-` and a digest of the database's host, port and name.

    The result is exported back into the environment, so child processes (a
    worker started by a test on the test database) keep the parent's prefix.
    """
    prefix = os.environ.get("DELLM_REDIS_PREFIX", "")
    if not prefix:
        where = f"{database.get('HOST') or ''}:{database.get('PORT') or ''}/{database.get('NAME') or ''}"
        prefix = "dellm-" + hashlib.sha256(where.encode()).hexdigest()[:10]
    if not _PREFIX.fullmatch(prefix):
        raise ImproperlyConfigured("DELLM_REDIS_PREFIX may hold 1-64 letters, digits, '_', '.' or '-'.")
    os.environ["DELLM_REDIS_PREFIX"] = prefix
    return prefix


def celery_transport_options(prefix: str) -> dict[str, str]:
    """Kombu's Redis transport options that put every key (queues, unacked, bindings, fanout) under the prefix."""
    return {"global_keyprefix": f"{prefix}:"}


def broker_url(url: str) -> str:
    """`url` as Celery's broker takes it: kombu knows no `unix://` (the embedded server's), only `redis+socket://`."""
    parts = urlsplit(url)
    if parts.scheme != "unix":
        return url
    db = parse_qs(parts.query).get("db", ["0"])[0]
    return f"redis+socket://{parts.path}?virtual_host={db}"


def key(prefix: str, *parts: object) -> str:
    """A Redis key or channel name of this instance: `<prefix>:part:part`."""
    return ":".join([prefix, *(str(part) for part in parts)])


def client_options(url: str, *, ca_file: str = "") -> dict[str, Any]:
    """Extra TLS options for `rediss://` URLs (redis-py and Celery's broker take the same names)."""
    if not url.startswith("rediss://"):
        if ca_file:
            raise ImproperlyConfigured("DELLM_REDIS_CA_FILE needs a rediss:// REDIS_URL.")
        return {}
    options: dict[str, Any] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    if ca_file:
        options["ssl_ca_certs"] = ca_file
    return options
