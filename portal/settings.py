"""The one settings module. Every knob comes from an environment variable (see README, Configuration)."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from pathlib import Path

from celery.schedules import crontab
from csp.constants import NONE, SELF, UNSAFE_INLINE

from portal.env import (
    ImproperlyConfiguredEnv,
    env_bool,
    env_database,
    env_int,
    env_list,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
# Only a DEBUG process may fall back to a fixed key; anything else must be given one.
SECRET_KEY = env_str("SECRET_KEY", "insecure-development-key-never-use-in-production" if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfiguredEnv(
        "SECRET_KEY is not set (required unless DEBUG=true); set it to a long random string"
    )

# The portal's address as users reach it: links in notifications and in backend jobs (AdminComment,
# Events), made by portal.links.absolute_url.
PORTAL_URL = env_str("PORTAL_URL", "http://127.0.0.1:8000")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Behind an HTTPS-terminating proxy, set HTTPS=true: cookies become secure-only, plain HTTP is
# redirected (but /healthz, which the container's health check calls directly) and HSTS is sent
# for the host and its subdomains, ready for the browsers' preload list (`check --deploy` is clean).
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", HTTPS)
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): scripts only from our own static files, no inline script
# (charts travel as JSON data blocks, see portal/charts.py). Styles may be inline: Plotly and htmx
# inject <style> elements, and a few templates set a width or an indent with style="...".
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",  # runserver (the demo) serves static through WhiteNoise: compressed
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "axes",  # failed sign-ins per username and per address (portal.throttling)
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from here, not a CDN: /api/docs/ works offline
    "django_filters",
    "django_htmx",
    "csp",
    "portal",
    "budgets",
    "scheduling",
    "notifications",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "portal.middleware.RefuseNulMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "portal.middleware.ContentionMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out sign-in into portal.throttling's 429
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out username or address
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one alone locks out
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "portal.throttling.lockout_response"
AXES_VERBOSE = False

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env_database("DATABASE_URL", VAR_DIR / "portal.sqlite3")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The demo's web, worker and traffic processes all write: BEGIN IMMEDIATE makes a writer wait
    # for the lock (up to the timeout) instead of failing at once with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("transaction_mode", "IMMEDIATE")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True
# collectstatic writes a gzip and a brotli copy of every text file; WhiteNoise serves whichever the
# browser accepts. The big one (static/plotly/) is committed with its .gz and .br beside it, so the
# demo and the tests, which serve from the source folders, send it compressed too.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
with contextlib.suppress(OSError):  # whitenoise warns on every request when the folder is missing
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.BoundedLimitOffsetPagination",
    "DEFAULT_PARSER_CLASSES": [
        "portal.api.parsers.ObjectJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 100,
    "DEFAULT_THROTTLE_RATES": {"token": env_str("TOKEN_REQUEST_RATE", "20/minute")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU budget portal API",
    "DESCRIPTION": "Budget tree, allocations, clusters, workloads and pending reasons.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: Redis in production (REDIS_URL); the demo uses kombu's filesystem transport under var/.
REDIS_URL = env_url("REDIS_URL", "", schemes=("redis", "rediss"))
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "filesystem://")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", REDIS_URL or "")
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL == "filesystem://":
    _broker_dir = VAR_DIR / "broker"
    for sub in ("out", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),  # else ./control in the working directory
        "store_processed": False,
    }
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
SCHEDULING_PASS_INTERVAL_S = env_int("SCHEDULING_PASS_INTERVAL_S", 10, minimum=1)
# On databases without advisory locks (SQLite) a pass's claim lapses after this many seconds,
# so a worker killed mid-pass does not block its cluster for ever.
SCHEDULING_PASS_LEASE_S = env_int("SCHEDULING_PASS_LEASE_S", 300, minimum=10)
# Passes that decided nothing and utilisation samples are dropped once the rollups hold them and
# they are this old (portal.retention; beat runs it daily, `manage.py prune_history` on demand).
HISTORY_RETENTION_DAYS = env_int("HISTORY_RETENTION_DAYS", 30, minimum=1)
# What-if replays (budgets.whatif): their own queue, so a long replay never delays a pass; at most one
# queued or running per user and WHATIF_MAX_ACTIVE per site; one unfinished after WHATIF_STALE_S fails.
WHATIF_QUEUE = env_str("WHATIF_QUEUE", "whatif")
WHATIF_MAX_ACTIVE = env_int("WHATIF_MAX_ACTIVE", 3, minimum=1)
WHATIF_STALE_S = env_int("WHATIF_STALE_S", 1800, minimum=60)
# Notifications (notifications/): sent by tasks on this queue; e-mail through EMAIL_BACKEND.
NOTIFICATIONS_QUEUE = env_str("NOTIFICATIONS_QUEUE", "celery")
NOTIFY_PROTECTION_WARNING_MIN = env_int("NOTIFY_PROTECTION_WARNING_MIN", 15, minimum=1)
NOTIFY_AVAILABILITY_BELOW_PCT = env_int("NOTIFY_AVAILABILITY_BELOW_PCT", 90, minimum=1)
NOTIFY_BACKEND_DOWN_MIN = env_int("NOTIFY_BACKEND_DOWN_MIN", 5, minimum=1)
NOTIFY_FAILED_PASSES = env_int("NOTIFY_FAILED_PASSES", 3, minimum=1)
NOTIFY_WEBHOOK_TIMEOUT_S = env_int("NOTIFY_WEBHOOK_TIMEOUT_S", 5, minimum=1)
NOTIFY_WEBHOOK_RETRIES = env_int("NOTIFY_WEBHOOK_RETRIES", 5, minimum=0)
NOTIFY_WEBHOOK_BACKOFF_S = env_int("NOTIFY_WEBHOOK_BACKOFF_S", 30, minimum=0)
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-portal@localhost")
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))  # for the file-based backend
CELERY_TASK_ROUTES = {"budgets.whatif_run": {"queue": WHATIF_QUEUE}}
# How often beat checks that each Slurm cluster's accounts mirror the budget tree (docs/slurm.md).
SLURM_MIRROR_INTERVAL_S = env_int("SLURM_MIRROR_INTERVAL_S", 60, minimum=5)
CELERY_BEAT_SCHEDULE = {
    "scheduling-passes": {
        "task": "scheduling.schedule_passes",
        "schedule": float(SCHEDULING_PASS_INTERVAL_S),
    },
    "slurm-account-mirrors": {
        "task": "scheduling.schedule_slurm_mirrors",
        "schedule": float(SLURM_MIRROR_INTERVAL_S),
    },
    "prune-history": {
        "task": "portal.prune_history",
        "schedule": 86400.0,
    },
    # notifications: protection ending and on-call health every minute, managers' checks less often
    "notify-minutely": {"task": "notifications.check_minutely", "schedule": 60.0},
    "notify-under-owed": {"task": "notifications.check_under_owed", "schedule": 3600.0},
    "notify-weekly-digest": {
        "task": "notifications.weekly_digest",
        "schedule": crontab(day_of_week=env_int("NOTIFY_DIGEST_WEEKDAY", 1, minimum=0), hour=8, minute=0),
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
