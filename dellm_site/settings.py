"""DeLLM settings. Every knob is an environment variable documented in `.env.example`."""

from pathlib import Path

import dj_database_url

from dellm_site import embedded
from dellm_site.env import env_bool, env_choice, env_float, env_int, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dellm-insecure-dev-key-change-me" if DEBUG else "")
ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "chat",
    "provenance",
]
# The research harness (`lab/`: benchmarks, seeder, evaluation) is not part of
# the product; `make test`, `make bench` and `make eval` set DELLM_LAB=1, and
# pytest uses tests/settings.py, which sets it too.
DELLM_LAB = env_bool("DELLM_LAB", False)
if DELLM_LAB:
    INSTALLED_APPS.append("lab")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "dellm_site.middleware.ContentSecurityPolicyMiddleware",
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
                "dellm_site.middleware.import_map_context",
            ],
        },
    },
]

DATABASES = {"default": dj_database_url.parse(embedded.database_url(), conn_max_age=60)}
# A socket directory given as `?host=` lands in OPTIONS; dbshell and pg_dump
# read HOST, so move it there.
if not DATABASES["default"]["HOST"] and "host" in DATABASES["default"]["OPTIONS"]:
    DATABASES["default"]["HOST"] = DATABASES["default"]["OPTIONS"].pop("host")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

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
]
STATIC_ROOT = BASE_DIR / ".dellm" / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- Redis and Celery -------------------------------------------------------
REDIS_URL = embedded.redis_url()
CELERY_BROKER_URL = REDIS_URL
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
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("DELLM_VISIBILITY_TIMEOUT", 3600)}
CELERY_BEAT_SCHEDULE = {
    # Expiries also get a timer task at confirmation; this catches any whose
    # timer was lost (broker flushed, worker down at the time).
    "fire-due-expiries": {"task": "provenance.deletions_fire_due", "schedule": 30.0},
    # Heavy histories (20k+ messages) get their own IVFFlat index; see chat/vector_indexes.py.
    "sync-vector-indexes": {"task": "chat.vector_indexes_sync", "schedule": 3600.0},
}
# Transient LLM/embedding faults (timeouts, 429, 5xx): retried with
# exponential backoff base * 2**n, at most this many times, then the turn fails.
DELLM_RETRY_BACKOFF = env_float("DELLM_RETRY_BACKOFF", 2.0)
DELLM_LLM_MAX_RETRIES = env_int("DELLM_LLM_MAX_RETRIES", 5)
# How long one Server-Sent Events stream for a turn may stay open.
DELLM_SSE_TIMEOUT = env_float("DELLM_SSE_TIMEOUT", 300.0)

# --- DeLLM ------------------------------------------------------------------
DELLM_LLM = env_choice(
    "DELLM_LLM",
    "openai" if env_str("OPENAI_API_KEY") or env_str("OPENAI_BASE_URL") else "offline",
    ("offline", "openai"),
)
DELLM_EMBEDDER = env_choice("DELLM_EMBEDDER", "offline", ("offline", "openai"))
# The embedder's vector dimension; 0 (the default for `openai`): probed once
# per process from the model. The column has none (any embedder, any
# dimension); switching embedders is `manage.py reembed` (README, "Retrieval").
DELLM_EMBEDDING_DIM = env_int("DELLM_EMBEDDING_DIM", 0 if DELLM_EMBEDDER == "openai" else 256)
DELLM_EMBEDDING_MODEL = env_str(
    "DELLM_EMBEDDING_MODEL", "text-embedding-3-small" if DELLM_EMBEDDER == "openai" else "wordllama-l2_supercat-256"
)
# Cosine similarity a past message needs to enter a context. 0.25 is the
# paper's value for OpenAI embeddings; WordLlama's scale is lower (see README,
# "Retrieval threshold").
DELLM_CONTEXT_THRESHOLD = env_float("DELLM_CONTEXT_THRESHOLD", 0.25 if DELLM_EMBEDDER == "openai" else 0.2)
# Default similarity for a semantic deletion selection ("forget what I said about X").
DELLM_SEMANTIC_THRESHOLD = env_float("DELLM_SEMANTIC_THRESHOLD", 0.5 if DELLM_EMBEDDER == "openai" else 0.45)
# Embeddings a deletion receipt's forget test probes at most (it runs inside
# the deletion, and costs probes x the owner's messages).
DELLM_FORGET_PROBES = env_int("DELLM_FORGET_PROBES", 64)
DELLM_CONTEXT_K = env_int("DELLM_CONTEXT_K", 5)
# `relevant` fuses similarity and full text (chat/retrieval.py); `vector` and
# `lexical` are its two signals alone, kept for comparison.
DELLM_CONTEXT_POLICIES = ("relevant", "vector", "lexical", "window", "full", "none")
DELLM_CONTEXT_POLICY = env_choice("DELLM_CONTEXT_POLICY", "relevant", DELLM_CONTEXT_POLICIES)
# Share of a question's word weight (IDF) a message must match to enter a
# context on words alone (README, "Retrieval threshold").
DELLM_LEXICAL_FLOOR = env_float("DELLM_LEXICAL_FLOOR", 0.35)
DELLM_CONTEXT_WINDOW = env_int("DELLM_CONTEXT_WINDOW", 10)
DELLM_MAX_MESSAGE_CHARS = env_int("DELLM_MAX_MESSAGE_CHARS", 20_000)
DELLM_CHAT_MODEL = env_str("DELLM_CHAT_MODEL", "gpt-4o-mini")
DELLM_LLM_TIMEOUT = env_float("DELLM_LLM_TIMEOUT", 60.0)
DELLM_TURN_MAX_REBUILDS = env_int("DELLM_TURN_MAX_REBUILDS", 5)
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
DELLM_DATA_DIR = embedded.data_dir()
# TOFU data for `manage.py dellm_eval` (lab): shipped in the repository with its MIT notice.
DELLM_TOFU_DIR = Path(env_str("DELLM_TOFU_DIR", str(BASE_DIR / "lab" / "evaluation" / "data" / "tofu")))
# Debian's Chromium, driven by Playwright in the browser tests and the graph-page benchmark.
DELLM_CHROMIUM = env_str("DELLM_CHROMIUM", "/usr/bin/chromium")

# --- HTTP API (dellm_site/api.py, chat/views.py, provenance/views.py) ----------
# Token auth first so an anonymous request gets 401 with `WWW-Authenticate`.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "dellm_site.api.exception_handler",
    "DEFAULT_THROTTLE_RATES": {"chat": env_str("DELLM_CHAT_RATE", "60/min")},
}
# Largest `page_size` a list endpoint accepts; larger asks are refused (400).
DELLM_MAX_PAGE_SIZE = env_int("DELLM_MAX_PAGE_SIZE", 200)
DELLM_PAGE_SIZE = env_int("DELLM_PAGE_SIZE", 50)
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

# Logs carry ids, never message text (I3); dellm_site/logging.py withholds
# exception messages, query strings and non-id arguments of our own loggers.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"withhold_text": {"()": "dellm_site.logging.WithholdText"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["withhold_text"]},
    },
    "root": {"handlers": ["console"], "level": env_str("DELLM_LOG_LEVEL", "INFO")},
    # httpx logs request lines only, but keep third-party chatter down.
    "loggers": {
        **{name: {"level": "WARNING"} for name in ("httpx", "openai", "pgserver")},
        # At DEBUG (with DEBUG=True) Django logs every SQL statement with its
        # parameters, message text included: never below INFO.
        "django.db.backends": {"level": "INFO"},
    },
}
