"""Without REDIS_URL, DeLLM uses its own embedded Redis, never one that answers on 127.0.0.1:6379.

A system Redis may save to disk (RDB snapshots, an append-only file), and
Redis holds task payloads, throttle counters, stream slots and a reply's
tokens in flight. The embedded one runs with neither, under the data
directory, and Celery's broker reaches it over its Unix socket.
"""

import os
import subprocess
import sys

from core.redis_ns import broker_url
from tests.helpers import ROOT

PROBE = """
import os
from dellm_site import embedded
url = embedded.redis_url()
import django
django.setup()
import redis
from django.conf import settings
from dellm_site.celery import app
with app.connection() as broker:
    broker.ensure_connection(max_retries=1)
    client = broker.default_channel.client
    reached = (client.ping(), client.connection_pool.connection_kwargs["path"])
server = redis.Redis.from_url(url)
print(url)
print(settings.CELERY_BROKER_URL)
print(*reached)
print(server.config_get("save")["save"] or "-", server.config_get("appendonly")["appendonly"])
"""


def test_an_unset_redis_url_starts_the_embedded_server_even_when_6379_answers(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in {"REDIS_URL", "DELLM_REDIS_PREFIX"}} | {
        "DELLM_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "dellm_site.settings",
        # Never connected to: the settings only need a URL.
        "DATABASE_URL": "postgresql://probe@127.0.0.1:1/probe",
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        subprocess.run([sys.executable, "-m", "dellm_site.embedded", "stop"], cwd=ROOT, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    socket = tmp_path / "redis.sock"
    assert done.stdout.splitlines() == [
        f"unix://{socket}?db=0",
        f"redis+socket://{socket}?virtual_host=0",
        f"True {socket}",
        "- no",
    ]


def test_broker_url_speaks_kombus_socket_scheme():
    assert broker_url("unix:///data/redis.sock?db=3") == "redis+socket:///data/redis.sock?virtual_host=3"
    assert broker_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert broker_url("rediss://:pw@host:6380/1") == "rediss://:pw@host:6380/1"
