"""Typed readers for settings that come from environment variables.

Every reader fails loudly with the variable's name and what was wrong, so a
typo in a deployment stops the process at start-up instead of running with a
silently different configuration.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse


class ImproperlyConfiguredEnv(ValueError):
    """An environment variable holds a value that cannot be used."""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfiguredEnv(
        f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off"
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name}={raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfiguredEnv(f"{name}={value} is below the minimum of {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def parse_database_url(url: str, *, name: str = "DATABASE_URL") -> dict:
    """Turn ``postgres://user:pass@host:port/db`` or ``sqlite:///path`` into a Django DATABASES entry."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)
        if path.startswith("//"):
            path = path[1:]
        elif path.startswith("/"):
            path = path[1:] or ":memory:"
        if not path:
            raise ImproperlyConfiguredEnv(
                f"{name}={url!r} names no SQLite file; use sqlite:///relative.db or sqlite:////abs.db"
            )
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path, "OPTIONS": {"timeout": 30}}
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        database = unquote(parsed.path.lstrip("/"))
        if not database:
            raise ImproperlyConfiguredEnv(
                f"{name}={url!r} names no database (postgres://user@host:5432/DBNAME)"
            )
        try:
            port = parsed.port
        except ValueError:
            raise ImproperlyConfiguredEnv(f"{name}={url!r} has a port that is not a number") from None
        options = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": database,
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(port or ""),
            "OPTIONS": options,
            "CONN_MAX_AGE": 60,
        }
    raise ImproperlyConfiguredEnv(
        f"{name}={url!r} has an unsupported scheme {parsed.scheme!r}; use postgres:// or sqlite://"
    )


def env_database(name: str, default_sqlite_path: Path) -> dict:
    raw = os.environ.get(name, "").strip()
    if not raw:
        default_sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(default_sqlite_path),
            "OPTIONS": {"timeout": 30},
        }
    return parse_database_url(raw, name=name)


def env_url(name: str, default: str, *, schemes: tuple[str, ...]) -> str:
    raw = os.environ.get(name, "").strip() or default
    if not raw:
        return raw
    scheme = urlparse(raw).scheme
    if scheme not in schemes:
        raise ImproperlyConfiguredEnv(
            f"{name}={raw!r} must start with one of {', '.join(s + '://' for s in schemes)}"
        )
    return raw
