"""The production compose file must be valid (Debian's docker-compose checks it without an engine)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def docker_compose() -> str:
    path = shutil.which("docker-compose")
    if path is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(
                "docker-compose is not installed; CI must validate docker-compose.yml (make system-deps)"
            )
        pytest.skip("docker-compose is not installed (make system-deps installs it)")
    return path


def _config(docker_compose: str, **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key != "SECRET_KEY"} | env
    return subprocess.run(
        [docker_compose, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_docker_compose_config_is_valid_with_a_secret_key(docker_compose):
    result = _config(docker_compose, SECRET_KEY="a-long-random-test-secret")

    assert result.returncode == 0, result.stderr


def test_docker_compose_refuses_to_start_without_a_secret_key(docker_compose):
    result = _config(docker_compose)

    assert result.returncode != 0 and "SECRET_KEY" in result.stderr
