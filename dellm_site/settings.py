"""DeLLM settings. Every knob is an environment variable documented in `.env.example`."""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

from core import redis_ns
from core.logs import logging_config
from dellm_site import embedded
from dellm_site.env import env_bool, env_choice, env_float, env_int, env_list, env_str
from dellm_site.keys import persistent_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

# Secure by default: development (debug pages, the demo user) only when asked for (`make run` asks, pages say so).
DEBUG = env_bool("DJANGO_DEBUG", False)
# Without a configured key, a random one made once and kept in the data directory.
SECRET_KEY = env_str("DJANGO_SECRET_KEY") or persistent_secret_key(embedded.data_dir())
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

# --- Serving over HTTPS (.env.example, "Production") ---------------------------
# One switch for a deployment behind TLS; each setting can still be set on its own.
DELLM_HTTPS = env_bool("DELLM_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", DELLM_HTTPS)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", DELLM_HTTPS)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", DELLM_HTTPS)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000 if DELLM_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", DELLM_HTTPS)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", DELLM_HTTPS)
# Only behind a proxy that sets X-Forwarded-Proto itself (and drops the client's):
# otherwise a client could claim HTTPS.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("DELLM_BEHIND_PROXY", False) else None
# Reverse proxies in front of DeLLM that each append the address they saw to
# X-Forwarded-For. The client's address, for the sign-in lock-out and the
# anonymous throttle alike, is the one the outermost of them saw
# (core.auth.sign_in.client_address); with 0 it is REMOTE_ADDR and the header is
# ignored, since a client writes whatever it likes there.
DELLM_TRUSTED_PROXIES = env_int("DELLM_TRUSTED_PROXIES", 1 if env_bool("DELLM_BEHIND_PROXY", False) else 0)
SESSION_COOKIE_HTTPONLY = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "knox",
    "axes",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "chat",
    "provenance",
    # Above both: the views that compose them (chat endpoint, /v1).
    "assistant",
]
# The research harness (`lab/`: benchmarks, seeder, evaluation) is not part of
# the product; `make test`, `make bench` and `make eval` set DELLM_LAB=1, and
# pytest uses tests/settings.py, which sets it too.
DELLM_LAB = env_bool("DELLM_LAB", False)
if DELLM_LAB:
    INSTALLED_APPS.append("lab")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files before anything else touches the request (no session, no CSP work).
    # WhiteNoise, async-capable: every middleware is, so an async view waits on no thread.
    "core.middleware.StaticFilesMiddleware",
    "core.middleware.NoStoreMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "core.middleware.ContentSecurityPolicyMiddleware",
    # A database outage answers 503 + Retry-After (core/overload.py).
    "core.overload.DatabaseUnavailableMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "dellm_site.urls"
WSGI_APPLICATION = "dellm_site.wsgi.application"
ASGI_APPLICATION = "dellm_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.middleware.import_map_context",
                "core.middleware.development_mode_context",
            ],
        },
    },
]

# A bounded psycopg pool per process (Django 5.2): a burst of requests waits up
# to DELLM_DB_POOL_TIMEOUT seconds for a connection and then gets a 503 with
# Retry-After (core/overload.py), instead of opening connections until
# PostgreSQL refuses everyone. Size it against `max_connections`: see
# `.env.example` ("Connection budget") and docs/DEPLOYMENT.md ("Connections").
DELLM_DB_POOL = env_bool("DELLM_DB_POOL", True)
DELLM_DB_POOL_MIN = env_int("DELLM_DB_POOL_MIN", 0)
# Per web process (its requests run in threads; each holds one connection while it runs).
DELLM_DB_POOL_MAX = env_int("DELLM_DB_POOL_MAX", 20)
# Per Celery worker child (dellm_site/celery.py): a child runs one task at a time.
DELLM_WORKER_DB_POOL_MAX = env_int("DELLM_WORKER_DB_POOL_MAX", 2)
DELLM_DB_POOL_TIMEOUT = env_float("DELLM_DB_POOL_TIMEOUT", 5.0)
# How many hash partitions by owner each per-owner table gets (chat_message,
# chat_contextedge, chat_turn, provenance_deletionrequest), read once, when
# migration chat 0013 (or `manage.py dellm_partition`) builds them; changing
# it later changes nothing (docs/DEPLOYMENT.md, "Partitions").
DELLM_PARTITIONS = env_int("DELLM_PARTITIONS", 16)
DATABASES = {"default": dj_database_url.parse(embedded.database_url(), conn_max_age=0 if DELLM_DB_POOL else 60)}
if DELLM_DB_POOL:
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": DELLM_DB_POOL_MIN,
        "max_size": DELLM_DB_POOL_MAX,
        "timeout": DELLM_DB_POOL_TIMEOUT,
    }
# A socket directory given as `?host=` lands in OPTIONS; dbshell and pg_dump
# read HOST, so move it there.
if not DATABASES["default"]["HOST"] and "host" in DATABASES["default"]["OPTIONS"]:
    DATABASES["default"]["HOST"] = DATABASES["default"]["OPTIONS"].pop("host")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    # Not a check: signs out every API token when a password changes (core/auth/tokens.py).
    {"NAME": "core.auth.tokens.RevokeTokensOnPasswordChange"},
]
# django-axes first: it refuses a locked-out username before any password is checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
# Failed sign-ins (page, admin, token endpoint) before a lock-out, counted per
# username and per client address separately: guessing one account's password
# from many addresses is stopped by the first, trying many accounts from one
# address by the second. The cost: a locked-out user (or address) waits the
# cool-off, or staff run `manage.py axes_reset_username <name>` / `axes_reset_ip`.
AXES_FAILURE_LIMIT = env_int("DELLM_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("DELLM_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# A success forgets the failures of the username that signed in, and only
# those: django-axes' own reset also deletes every failure from the same
# address, the victim's included, so an attacker who signs in to their own
# account between guesses would never be locked out (core.auth.sign_in.AttemptHandler).
AXES_RESET_ON_SUCCESS = True
AXES_HANDLER = "core.auth.sign_in.AttemptHandler"
AXES_LOCKOUT_CALLABLE = "core.auth.sign_in.lockout_response"
# The address of a sign-in: DELLM_TRUSTED_PROXIES decides whether X-Forwarded-For counts.
AXES_CLIENT_IP_CALLABLE = "core.auth.sign_in.client_address"
# Sign-ins checking a password at once per web process (CPU-bound: more than the
# cores gain nothing) and how long one waits for its turn before a 503 (core/auth/sign_in.py).
DELLM_SIGN_IN_CONCURRENCY = env_int("DELLM_SIGN_IN_CONCURRENCY", max(2, os.cpu_count() or 1))
DELLM_SIGN_IN_WAIT = env_float("DELLM_SIGN_IN_WAIT", 30.0)
# API tokens (django-rest-knox): hashed, expiring, revoked by sign-out and password change.
# Tokens kept per user; signing in again drops the oldest beyond this.
DELLM_TOKEN_LIMIT_PER_USER = env_int("DELLM_TOKEN_LIMIT_PER_USER", 50)
# Agent tokens (for MCP clients) a user may hold at once; they do not expire by themselves.
DELLM_AGENT_TOKEN_LIMIT = env_int("DELLM_AGENT_TOKEN_LIMIT", 20)
# An agent's note derives from every memory an agent of the user was shown this long before it (the read log).
DELLM_NOTE_READ_WINDOW = timedelta(seconds=env_int("DELLM_NOTE_READ_WINDOW_SECONDS", 3600))
# MCP sessions over HTTP: each holds a server task and its streams until it ends or idles out.
DELLM_MCP_SESSIONS_PER_USER = env_int("DELLM_MCP_SESSIONS_PER_USER", 10)
DELLM_MCP_SESSION_RATE = env_int("DELLM_MCP_SESSION_RATE", 30)  # new sessions a minute, per user
DELLM_MCP_SESSION_IDLE_SECONDS = env_float("DELLM_MCP_SESSION_IDLE_SECONDS", 300.0)
DELLM_MCP_MAX_SESSIONS = env_int("DELLM_MCP_MAX_SESSIONS", 1000)  # the whole server's
# Knox's own token model (agent tokens point at it: assistant/models.py).
KNOX_TOKEN_MODEL = "knox.AuthToken"
REST_KNOX = {
    "TOKEN_TTL": timedelta(hours=env_int("DELLM_TOKEN_TTL_HOURS", 24 * 30)),
    "AUTH_HEADER_PREFIX": "Token",
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [
    BASE_DIR / "frontend" / "static",
    # Third-party browser modules installed by `npm ci` (frontend/package.json),
    # served as they are and mapped by the import map in base.html: no bundler.
    ("vendor/cytoscape", BASE_DIR / "frontend" / "node_modules" / "cytoscape" / "dist"),
    ("vendor/cytoscape-dagre", BASE_DIR / "frontend" / "node_modules" / "cytoscape-dagre" / "dist"),
    ("vendor/dagre", BASE_DIR / "frontend" / "node_modules" / "@dagrejs" / "dagre" / "dist"),
]
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(embedded.data_dir() / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # WhiteNoise serves what `collectstatic` gathered (compressed); in
    # development it serves straight from the source folders instead.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = env_bool("DELLM_STATIC_FROM_SOURCE", DEBUG)
# An uploaded chat history is plaintext: up to FILE_UPLOAD_MAX_MEMORY_SIZE
# (Django's 2.5 MB, which also bounds the ASGI request body spool in memory)
# it stays in memory, beyond that in a temporary file that never has a name,
# so a killed process leaves no `.upload` file behind (dellm_site/uploads.py).
FILE_UPLOAD_HANDLERS = [
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "dellm_site.uploads.UnnamedTemporaryFileUploadHandler",
]
FILE_UPLOAD_TEMP_DIR = env_str("DELLM_UPLOAD_TEMP_DIR") or None

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- Redis and Celery -------------------------------------------------------
REDIS_URL = embedded.redis_url()
# Every Redis key and channel of this instance (Celery queues and their
# bookkeeping, turn channels, stream slots) starts with this prefix, so
# instances sharing one Redis never see each other's work (core/redis_ns.py).
DELLM_REDIS_PREFIX = redis_ns.instance_prefix(DATABASES["default"])
# TLS (`rediss://` URLs): the CA bundle that signs the server's certificate;
# unset, the system's trust store. A password goes in the URL (`rediss://:secret@host:6380/0`).
DELLM_REDIS_CA_FILE = env_str("DELLM_REDIS_CA_FILE")
DELLM_REDIS_OPTIONS = redis_ns.client_options(REDIS_URL, ca_file=DELLM_REDIS_CA_FILE)
CELERY_BROKER_URL = redis_ns.broker_url(REDIS_URL)
if REDIS_URL.startswith("rediss://"):
    CELERY_BROKER_USE_SSL = DELLM_REDIS_OPTIONS
# One cache shared by every process (throttle counters, axes), in Redis under a
# prefix of this instance: by default the instance's Redis prefix (derived from
# the database), so instances (and test runs) sharing a Redis keep apart.
DELLM_CACHE_KEY_PREFIX = env_str("DELLM_CACHE_KEY_PREFIX", DELLM_REDIS_PREFIX)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": DELLM_CACHE_KEY_PREFIX,
        "OPTIONS": DELLM_REDIS_OPTIONS,
    }
}
# Task results are never read back: turns record their outcome in the database,
# and a result store would be one more place where content could linger.
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env_bool("DELLM_CELERY_EAGER", False)
# Workers keep the LOGGING below (its filter withholds text) instead of
# replacing the root logger's handlers with Celery's own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_DEFAULT_QUEUE = env_str("DELLM_CELERY_QUEUE", "dellm")
# A task whose worker died unacknowledged is handed out again after this long
# (a pool child killed mid-task is requeued at once: reject_on_worker_lost).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("DELLM_VISIBILITY_TIMEOUT", 3600),
    **redis_ns.celery_transport_options(DELLM_REDIS_PREFIX),
}
# An expiry this close (seconds) gets its own timer task at confirmation; a
# later one is left to beat's `fire-due-expiries`, so no task waits in a worker
# for longer than this (keep it under the visibility timeout).
DELLM_EXPIRY_TIMER_HORIZON = env_float("DELLM_EXPIRY_TIMER_HORIZON", 600.0)
# Longest time (seconds, plus one rebuild) a purged word stays in an index (provenance/erasure/registry.py).
DELLM_SEARCH_SCRUB_INTERVAL = env_float("DELLM_SEARCH_SCRUB_INTERVAL", 300.0)
CELERY_BEAT_SCHEDULE = {
    # Expiries also get a timer task at confirmation; this catches any whose
    # timer was lost (broker flushed, worker down at the time).
    "fire-due-expiries": {"task": "provenance.deletions_fire_due", "schedule": 30.0},
    # Heavy histories (20k+ messages) get their own IVFFlat index; see chat/index/vectors.py.
    "sync-vector-indexes": {"task": "chat.vector_indexes_sync", "schedule": 3600.0},
    # An index keeps a purged word (GIN keys, vector centroids) until rebuilt:
    # rebuild every text index (concurrently) when purges ran since the last
    # time (provenance/erasure).
    "erasure-scrub": {"task": "provenance.erasure_scrub", "schedule": DELLM_SEARCH_SCRUB_INTERVAL},
    # A purge whose vacuum an older snapshot held back (a pg_dump, a long report) is vacuumed again once it closes.
    "erasure-vacuum-sweep": {
        "task": "provenance.erasure_vacuum_sweep",
        "schedule": env_float("DELLM_SWEEP_INTERVAL", 60.0),
    },
    # Turns whose task was lost or gave up (database outage, worker killed
    # twice) are re-run or failed with a reason (chat.turns.recovery.turns_stuck_sweep).
    "sweep-stuck-turns": {"task": "chat.turns_sweep", "schedule": env_float("DELLM_SWEEP_INTERVAL", 60.0)},
    # Regenerations whose task was lost (that sweep leaves regeneration turns
    # to their deletion) are run again (provenance.regeneration.replies.regenerations_stalled_sweep).
    "sweep-stalled-regenerations": {
        "task": "provenance.regenerations_sweep",
        "schedule": env_float("DELLM_SWEEP_INTERVAL", 60.0),
    },
    # Imports whose worker vanished: failed, their uploads deleted.
    "sweep-stuck-imports": {"task": "chat.imports_sweep", "schedule": 600.0},
    # Deletions whose verifying thread stopped before their receipt get one
    # (provenance.deletions.receipts.deletions_unverified_sweep).
    "sweep-lost-receipts": {"task": "provenance.receipts_sweep", "schedule": env_float("DELLM_SWEEP_INTERVAL", 60.0)},
}
# A turn pending or running with no progress for this long counts as stuck.
DELLM_TURN_STUCK_AFTER = env_float("DELLM_TURN_STUCK_AFTER", 600.0)
# Attempts (task runs) a turn gets before the sweep fails it instead of re-running it.
DELLM_TURN_MAX_ATTEMPTS = env_int("DELLM_TURN_MAX_ATTEMPTS", 3)
# Transient database errors (connection lost, server full, pool timeout) in a
# task: retried with backoff DELLM_DB_RETRY_BACKOFF * 2**n seconds (jittered, at most 60).
DELLM_DB_MAX_RETRIES = env_int("DELLM_DB_MAX_RETRIES", 5)
DELLM_DB_RETRY_BACKOFF = env_float("DELLM_DB_RETRY_BACKOFF", 1.0)
# Transient LLM/embedding faults (timeouts, 429, 5xx): retried with backoff base * 2**n, this many times at most.
DELLM_RETRY_BACKOFF = env_float("DELLM_RETRY_BACKOFF", 2.0)
DELLM_LLM_MAX_RETRIES = env_int("DELLM_LLM_MAX_RETRIES", 5)
# How long one Server-Sent Events stream for a turn may stay open.
DELLM_SSE_TIMEOUT = env_float("DELLM_SSE_TIMEOUT", 300.0)
# Open streams per user (counted in Redis, each slot expiring on its own); one more gets a JSON 429.
DELLM_MAX_STREAMS_PER_USER = env_int("DELLM_MAX_STREAMS_PER_USER", 8)
# Redis connections one web process may open (each open turn stream holds one).
DELLM_REDIS_MAX_CONNECTIONS = env_int("DELLM_REDIS_MAX_CONNECTIONS", 5000)
# An open stream re-reads its turn this often even without news (a lost pub/sub message costs at most this).
DELLM_SSE_RECHECK = env_float("DELLM_SSE_RECHECK", 30.0)
# --- DeLLM ------------------------------------------------------------------
DELLM_LLM = env_choice(
    "DELLM_LLM",
    "openai" if env_str("OPENAI_API_KEY") or env_str("OPENAI_BASE_URL") else "offline",
    ("offline", "openai"),
)
# Redacting part of a message: with a model configured, the preview offers its
# rewrite (the user approves the exact text); off, or offline, the rule-based one.
DELLM_REDACT_WITH_MODEL = env_bool("DELLM_REDACT_WITH_MODEL", True)
# The redactions one deletion preview scans, synchronous in the request: messages and characters
# (linear rules, 30-40 ms per 20,000 characters: `make bench` part `redaction`); past either cap
# a message is listed unscanned. With a model, each is one call charged to the chat budget.
DELLM_REDACTION_MAX_MESSAGES = env_int("DELLM_REDACTION_MAX_MESSAGES", 50)
DELLM_REDACTION_MAX_CHARS = env_int("DELLM_REDACTION_MAX_CHARS", 200_000)
DELLM_EMBEDDER = env_choice("DELLM_EMBEDDER", "offline", ("offline", "openai"))
# The embedder's vector dimension; 0 (the default for `openai`): probed once
# per process from the model. The column has none (any embedder, any
# dimension); switching embedders is `manage.py reembed` (docs/RETRIEVAL.md).
DELLM_EMBEDDING_DIM = env_int("DELLM_EMBEDDING_DIM", 0 if DELLM_EMBEDDER == "openai" else 256)
DELLM_EMBEDDING_MODEL = env_str(
    "DELLM_EMBEDDING_MODEL", "text-embedding-3-small" if DELLM_EMBEDDER == "openai" else "wordllama-l2_supercat-256"
)
# Cosine similarity a past message needs to enter a context. 0.25 is the
# paper's value for OpenAI embeddings; WordLlama's scale is lower (lab/HISTORY.md,
# "Retrieval quality", has the calibration).
DELLM_CONTEXT_THRESHOLD = env_float("DELLM_CONTEXT_THRESHOLD", 0.25 if DELLM_EMBEDDER == "openai" else 0.2)
# Default similarity for a semantic deletion selection ("forget what I said about X").
DELLM_SEMANTIC_THRESHOLD = env_float("DELLM_SEMANTIC_THRESHOLD", 0.5 if DELLM_EMBEDDER == "openai" else 0.45)
# Embeddings a deletion receipt's forget test probes at most (it runs inside
# the deletion, and costs probes x the owner's messages).
DELLM_FORGET_PROBES = env_int("DELLM_FORGET_PROBES", 64)
# An executed deletion still without its receipt this long after execution lost its verifying thread
# (the HTTP confirm verifies after it answers): beat writes its receipt, the forget check marked not run.
DELLM_VERIFY_STALE_AFTER = env_float("DELLM_VERIFY_STALE_AFTER", 600.0)
DELLM_CONTEXT_K = env_int("DELLM_CONTEXT_K", 5)
# `relevant` fuses similarity and full text (chat/retrieval/fused.py); `vector` and
# `lexical` are its two signals alone, kept for comparison.
DELLM_CONTEXT_POLICIES = ("relevant", "vector", "lexical", "window", "full", "none")
DELLM_CONTEXT_POLICY = env_choice("DELLM_CONTEXT_POLICY", "relevant", DELLM_CONTEXT_POLICIES)
# Share of a question's word weight (IDF) a message must match to enter a
# context on words alone (docs/RETRIEVAL.md).
DELLM_LEXICAL_FLOOR = env_float("DELLM_LEXICAL_FLOOR", 0.35)
DELLM_CONTEXT_WINDOW = env_int("DELLM_CONTEXT_WINDOW", 10)
DELLM_MAX_MESSAGE_CHARS = env_int("DELLM_MAX_MESSAGE_CHARS", 20_000)
DELLM_CHAT_MODEL = env_str("DELLM_CHAT_MODEL", "gpt-4o-mini")
# The model id that /v1/models lists and /v1/chat/completions accepts (the
# OpenAI-compatible endpoint). Whatever model answers behind it, clients see DeLLM.
DELLM_OPENAI_MODEL = env_str("DELLM_OPENAI_MODEL", "dellm")
DELLM_LLM_TIMEOUT = env_float("DELLM_LLM_TIMEOUT", 60.0)
DELLM_TURN_MAX_REBUILDS = env_int("DELLM_TURN_MAX_REBUILDS", 5)
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
DELLM_DATA_DIR = embedded.data_dir()
# Importing chat histories (chat/imports/history.py, docs/IMPORT.md):
# an upload's size in bytes, a zip's conversations.json unpacked, and what one
# file may hold. A conversation's replies derive from everything before them,
# stored in linear form (chat/lineage.py): about one edge per message.
DELLM_IMPORT_MAX_BYTES = env_int("DELLM_IMPORT_MAX_BYTES", 50 * 1024 * 1024)
# The unpacked text: parsed as a stream (chat/imports/formats/stream.py); the worker
# holds an outline, then at most 8 M characters of it at a time, so its peak
# does not follow this (docs/IMPORT.md, "Reading a file in bounded memory").
DELLM_IMPORT_MAX_UNZIPPED_BYTES = env_int("DELLM_IMPORT_MAX_UNZIPPED_BYTES", 128 * 1024 * 1024)
DELLM_IMPORT_MAX_CONVERSATIONS = env_int("DELLM_IMPORT_MAX_CONVERSATIONS", 10_000)
DELLM_IMPORT_MAX_MESSAGES = env_int("DELLM_IMPORT_MAX_MESSAGES", 100_000)
DELLM_IMPORT_MAX_CONVERSATION_MESSAGES = env_int("DELLM_IMPORT_MAX_CONVERSATION_MESSAGES", 2_000)
DELLM_IMPORT_MAX_MESSAGE_CHARS = env_int("DELLM_IMPORT_MAX_MESSAGE_CHARS", 100_000)
# A conversation of ChatGPT's or Claude's list is held whole while read and
# landed: the text it may build (every branch). Past it, it is refused by name.
DELLM_IMPORT_MAX_CONVERSATION_CHARS = env_int("DELLM_IMPORT_MAX_CONVERSATION_CHARS", 8_000_000)
# DeLLM's export: its edges are held until the whole file is read (about 150 bytes each).
DELLM_IMPORT_MAX_EDGES = env_int("DELLM_IMPORT_MAX_EDGES", 1_000_000)
# Per-account quotas on stored messages (chat/quotas.py), refused at the bulk doors (413, or 429
# with Retry-After): 1,000,000 is 270 messages a day for ten years; 200,000 a day is two files of
# the largest size (the import throttle alone let one account write 48 M a day).
DELLM_QUOTA_MESSAGES = env_int("DELLM_QUOTA_MESSAGES", 1_000_000)
DELLM_QUOTA_MESSAGES_PER_DAY = env_int("DELLM_QUOTA_MESSAGES_PER_DAY", 200_000)
# Transcript messages /v1 stores in one request (those the thread does not
# have yet). A client continuing a thread sends one or two of them (a reply
# written by another model, the turn before a retry); 100 is fifty turns made
# elsewhere. Beyond: 413, nothing stored (a whole history is an import).
DELLM_COMPLETION_MAX_NEW_MESSAGES = env_int("DELLM_COMPLETION_MAX_NEW_MESSAGES", 100)
# TOFU data for `manage.py dellm_eval` (lab): shipped in the repository with its MIT notice.
DELLM_TOFU_DIR = Path(env_str("DELLM_TOFU_DIR", str(BASE_DIR / "lab" / "evaluation" / "data" / "tofu")))
# Debian's Chromium, driven by Playwright in the browser tests and the graph-page benchmark.
DELLM_CHROMIUM = env_str("DELLM_CHROMIUM", "/usr/bin/chromium")

# --- HTTP API (core/api/, chat/views.py, assistant/chat_view.py, provenance/api/) --------------------
# Token auth first so an anonymous request gets 401 with `WWW-Authenticate`.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # `Authorization: Token <t>` or `Bearer <t>`, knox-hashed (core/auth/tokens.py); an agent's
        # token (assistant/mcp/tokens.py) opens /mcp only and is refused here.
        "assistant.mcp.tokens.PersonTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's JSON parser with a nesting limit (core/api/json_body.py): too deep is a 400, not a RecursionError.
    "DEFAULT_PARSER_CLASSES": ["core.api.json_body.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.api.handler.exception_handler",
    # An anonymous client is its address by DeLLM's rule (core.auth.sign_in.client_address, which `auth` uses);
    # without NUM_PROXIES, DRF's own takes the whole X-Forwarded-For as the client, a new one per invented value.
    "NUM_PROXIES": DELLM_TRUSTED_PROXIES,
    # Scoped, per user (per address when anonymous), counted in the shared cache.
    "DEFAULT_THROTTLE_RATES": {
        "chat": env_str("DELLM_CHAT_RATE", "60/min"),
        "facts": env_str("DELLM_FACTS_MODEL_RATE", "600/hour"),
        "auth": env_str("DELLM_AUTH_RATE", "20/min"),
        "deletion_preview": env_str("DELLM_DELETION_PREVIEW_RATE", "30/min"),
        "deletion_action": env_str("DELLM_DELETION_ACTION_RATE", "60/min"),
        "dependents": env_str("DELLM_DEPENDENTS_RATE", "120/min"),
        "graph": env_str("DELLM_GRAPH_RATE", "30/min"),
        # A page of a thread: the chat page opens one per thread and one more per "Load earlier".
        "thread": env_str("DELLM_THREAD_RATE", "120/min"),
        "thread_create": env_str("DELLM_THREAD_CREATE_RATE", "30/min"),
        "export": env_str("DELLM_EXPORT_RATE", "5/hour"),
        "search": env_str("DELLM_SEARCH_RATE", "120/min"),
        "import": env_str("DELLM_IMPORT_RATE", "20/hour"),
    },
}
# Deepest nesting of arrays and objects a JSON body may have (every JSON door:
# /api/, /v1). `json.loads` recurses per level and fails near 1,000; no request
# of the API needs more than ten, a /v1 tool's JSON Schema perhaps a few dozen.
DELLM_JSON_MAX_DEPTH = env_int("DELLM_JSON_MAX_DEPTH", 100)
# Largest `page_size` a list endpoint accepts; larger asks are refused (400).
DELLM_MAX_PAGE_SIZE = env_int("DELLM_MAX_PAGE_SIZE", 200)
DELLM_PAGE_SIZE = env_int("DELLM_PAGE_SIZE", 50)
# Edges listed per message and direction in a page of messages and in one message's detail
# (`edges_truncated` says when some were left out; the graph and the dependents endpoint have all):
# ten times the default k, so a page holds at most 200 x 2 x 50 edges.
DELLM_PAGE_MAX_EDGES = env_int("DELLM_PAGE_MAX_EDGES", 50)
DELLM_MESSAGE_MAX_EDGES = env_int("DELLM_MESSAGE_MAX_EDGES", 5000)
# The graph opens as a window of the newest messages (`next` loads older ones).
DELLM_GRAPH_WINDOW = env_int("DELLM_GRAPH_WINDOW", 2000)
DELLM_GRAPH_MAX_NODES = env_int("DELLM_GRAPH_MAX_NODES", 5000)
DELLM_GRAPH_MAX_EDGES = env_int("DELLM_GRAPH_MAX_EDGES", 25000)
# Explanation paths in a preview or a dependents answer, the nearest first.
DELLM_MAX_EXPLANATION_PATHS = env_int("DELLM_MAX_EXPLANATION_PATHS", 500)
# One dependent's path (one recursive query): levels and messages walked at most; past either, a 400.
DELLM_MAX_PATH_LENGTH = env_int("DELLM_MAX_PATH_LENGTH", 3000)
DELLM_MAX_PATH_WALK = env_int("DELLM_MAX_PATH_WALK", 10_000)
# Receipt threads at once per web process (a connection each; past it a confirm verifies in its request).
DELLM_VERIFY_THREADS = env_int("DELLM_VERIFY_THREADS", max(1, DELLM_DB_POOL_MAX // 4))
# Where people open DeLLM: the base of the confirmation links the MCP server's `forget` answers over stdio
# (over HTTP, the request's own host when it is one of ALLOWED_HOSTS).
DELLM_PUBLIC_URL = env_str("DELLM_PUBLIC_URL", "http://127.0.0.1:8000")
SPECTACULAR_SETTINGS = {
    "TITLE": "DeLLM API",
    "DESCRIPTION": "A chat assistant whose long-term memory can be faithfully erased.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/",
    # Swagger UI and ReDoc from the drf-spectacular-sidecar wheel: the docs work offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # API.md: every endpoint requires auth, the schema and its docs page too.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "ENUM_NAME_OVERRIDES": {
        "MessageStatusEnum": "chat.models.Message.Status",
        "TurnStatusEnum": "chat.models.Turn.Status",
        "DeletionStatusEnum": "provenance.models.DeletionRequest.Status",
        "SelectorEnum": "provenance.models.DeletionRequest.Selector",
    },
}

# Distilled memory: facts and thread titles (chat/facts/, chat/titles.py).
from dellm_site.settings_memory import *  # noqa: E402, F403

# Logs carry ids, never message text (I3): one handler, always filtered (core/logs.py).
LOGGING = logging_config(level=env_str("DELLM_LOG_LEVEL", "INFO"))
# No error mail: Django's would carry request bodies (message text).
ADMINS: list[tuple[str, str]] = []
