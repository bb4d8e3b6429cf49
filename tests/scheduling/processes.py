"""Run real processes (a pass, a Celery worker) against the test database, and stop them for sure."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """The test database as a DATABASE_URL another process can open (skips for in-memory SQLite)."""
    settings = connection.settings_dict
    if connection.vendor == "postgresql":
        auth = quote(settings["USER"] or "")
        if settings.get("PASSWORD"):
            auth += ":" + quote(settings["PASSWORD"])
        host = f"{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}"
        return f"postgres://{auth}@{host}/{settings['NAME']}"
    name = str(settings["NAME"])
    if "memory" in name or name == ":memory:":
        pytest.skip(
            "another process cannot open an in-memory SQLite test database; set DATABASE_URL to PostgreSQL"
        )
    return f"sqlite:///{Path(name).resolve()}"


def child_env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "SECRET_KEY": os.environ.get("SECRET_KEY", "test-only"),
    }
    env.update(extra)
    return env


def start(args: list[str], **env: str) -> subprocess.Popen:
    """Start a child in its own process group (so a kill takes its children too)."""
    return subprocess.Popen(
        args, cwd=ROOT, env=child_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, text=True,
    )  # fmt: skip


def python(code: str, **env: str) -> subprocess.Popen:
    prelude = "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'portal.settings'); django.setup()\n"
    return start([sys.executable, "-c", prelude + code], **env)


def kill(process: subprocess.Popen, sig: int = signal.SIGKILL) -> str:
    """Signal the whole process group, wait for it, and return what it printed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate(timeout=10)
    return output or ""


def wait_for(
    condition: Callable[[], bool], *, timeout: float, what: str, process: subprocess.Popen | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if process is not None and process.poll() is not None:
            raise AssertionError(
                f"the process ended before {what}:\n{process.stdout.read() if process.stdout else ''}"
            )
        time.sleep(0.1)
    output = kill(process) if process is not None else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{output[-4000:]}")
