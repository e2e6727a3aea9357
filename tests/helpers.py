"""Where purged text could linger, read as plain text: a pg_dump of the database and every Redis key."""

import base64
import contextlib
import subprocess

import redis
from django.conf import settings
from django.db import connection
from pgserver._commands import POSTGRES_BIN_PATH


def pg_dump() -> str:
    db = connection.settings_dict
    command = [str(POSTGRES_BIN_PATH / "pg_dump"), "--no-owner", "-d", db["NAME"], "-U", db["USER"] or "postgres"]
    if db["HOST"]:
        command += ["-h", db["HOST"]]
    if db["PORT"]:
        command += ["-p", str(db["PORT"])]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout


def redis_dump() -> str:
    """Every key and value in the Redis database Celery uses, as text."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    parts = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind == "string":
            value = client.get(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        else:
            value = client.xrange(key) if kind == "stream" else b""
        parts.append(f"{key!r}={value!r}")
    text = "\n".join(parts)
    # Task bodies are base64 in the queue: decode what can be decoded.
    for token in text.split("'"):
        with contextlib.suppress(ValueError):
            text += base64.b64decode(token, validate=True).decode("utf-8", "ignore")
    return text
