"""`make demo` (scripts/demo.sh) starts with the charts already full: 30 days of history."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STARTUP_LIMIT_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def demo_until_serving(tmp_path: Path, **env: str) -> tuple[str, float]:
    """Run scripts/demo.sh until it serves; return its output and the start-up time, then stop it."""
    environment = {**os.environ, "VAR_DIR": str(tmp_path), "PORT": str(free_port()), "SECRET_KEY": "x", **env}
    log = tmp_path / "demo.out"
    started = time.monotonic()
    with log.open("w") as out:
        demo = subprocess.Popen(["bash", "scripts/demo.sh"], cwd=ROOT, env=environment, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        while "Serving the portal" not in log.read_text() and demo.poll() is None:
            if time.monotonic() - started > STARTUP_LIMIT_S:
                pytest.fail(f"make demo took over {STARTUP_LIMIT_S} s to serve:\n{log.read_text()}")
            time.sleep(0.2)
        return log.read_text(), time.monotonic() - started
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=30)


def oldest_history(tmp_path: Path) -> datetime | None:
    with sqlite3.connect(tmp_path / "portal.sqlite3") as database:
        (oldest,) = database.execute("SELECT min(hour) FROM portal_clusterhour").fetchone()
    return oldest and datetime.fromisoformat(oldest).replace(tzinfo=UTC)


def test_the_demo_backfills_a_month_of_history_before_serving_within_a_minute(tmp_path):
    output, seconds = demo_until_serving(tmp_path)
    assert "Backfilling 30 days of history" in output
    assert oldest_history(tmp_path) <= datetime.now(UTC) - timedelta(days=29)
    assert seconds < STARTUP_LIMIT_S


def test_demo_history_zero_skips_the_backfill(tmp_path):
    output, _ = demo_until_serving(tmp_path, DEMO_HISTORY="0")
    assert "Backfilling" not in output
    assert oldest_history(tmp_path) is None or oldest_history(tmp_path) > datetime.now(UTC) - timedelta(
        days=1
    )
