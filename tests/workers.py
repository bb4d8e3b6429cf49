"""A real Celery worker process on its own queue of the real Redis broker (tests marked ``celery``)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from tests.scheduling.processes import kill, start


def redis_broker() -> str:
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs REDIS_URL (the real Redis broker); .ci/run sets it")
    return settings.CELERY_BROKER_URL


def worker_start(queue: str, **env: str) -> subprocess.Popen:
    """A solo worker consuming ``queue`` only, its settings from the test database and ``env``."""
    broker = redis_broker()
    celery = str(Path(sys.executable).with_name("celery"))
    return start(
        [celery, "-A", "portal", "worker", "--pool", "solo", "-Q", queue, "-n", f"{queue}-{uuid.uuid4().hex[:4]}@%h",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
        REDIS_URL=broker, CELERY_BROKER_URL=broker, **env,
    )  # fmt: skip


@contextmanager
def worker_running(queue: str, **env: str) -> Iterator[subprocess.Popen]:
    process = worker_start(queue, **env)
    try:
        yield process
    finally:
        kill(process)
        connections.close_all()


def unique_queue(prefix: str) -> str:
    return f"test-{prefix}-{uuid.uuid4().hex[:8]}"
