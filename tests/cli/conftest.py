"""The CLI against a live test server: the lab of tests/scheduling, API tokens, a private config dir.

``gpus(*args, as_user=...)`` runs ``gpus_cli.main.main`` in this process (the live server answers
from its own thread) and returns the exit code with what it printed; ``GPUS_URL`` points at the
live server and ``XDG_CONFIG_HOME`` at a temporary directory, so no test reads the developer's token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from gpus_cli.main import main
from portal.tokens import token_issue
from tests.scheduling.conftest import build_lab


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def fast_passwords(settings) -> None:  # noqa: ANN001
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def lab(transactional_db: None) -> SimpleNamespace:
    built = build_lab()
    built.tokens = {user.username: token_issue(user=user, name="cli tests")[1] for user in
                    (built.alice, built.bob, built.charlie, built.dave, built.oscar)}  # fmt: skip
    return built


@pytest.fixture
def config_home(tmp_path, monkeypatch):  # noqa: ANN001, ANN201
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for variable in ("GPUS_TOKEN", "GPUS_URL", "GPUS_CLUSTER"):
        monkeypatch.delenv(variable, raising=False)
    return home


@pytest.fixture
def gpus(lab, live_server, config_home, capsys, monkeypatch) -> Callable[..., Ran]:  # noqa: ANN001
    def run(*args: str, as_user: str | None = "bob", token: str | None = None) -> Ran:
        monkeypatch.setenv("GPUS_URL", live_server.url)
        chosen = token if token is not None else (lab.tokens[as_user] if as_user else "")
        monkeypatch.setenv("GPUS_TOKEN", chosen)
        capsys.readouterr()
        code = main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run
