"""Where the CLI keeps the portal's address and the user's token, and what overrides them.

The file is ``$XDG_CONFIG_HOME/gpus/config.json`` (``~/.config/gpus/config.json`` by default),
written with mode 0600 in a 0700 directory because the token is a password. ``GPUS_URL`` and
``GPUS_TOKEN`` in the environment win over the file (CI jobs, scripts, a second portal).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import click

APP_NAME = "gpus"
DEFAULT_URL = "http://127.0.0.1:8000"
URL_VARIABLE = "GPUS_URL"
TOKEN_VARIABLE = "GPUS_TOKEN"
CLUSTER_VARIABLE = "GPUS_CLUSTER"


@dataclass(frozen=True)
class Settings:
    url: str = DEFAULT_URL
    token: str = ""
    cluster: str = ""


def config_path() -> Path:
    """The config file, under the XDG config directory (click follows ``XDG_CONFIG_HOME``)."""
    return Path(click.get_app_dir(APP_NAME)) / "config.json"


def settings_saved() -> Settings:
    """What ``gpus login`` saved, or the defaults when nothing was (an unreadable file is an error)."""
    path = config_path()
    if not path.exists():
        return Settings()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise click.ClickException(f"cannot read {path}: {error}") from None
    known = {key: str(value) for key, value in data.items() if key in Settings.__dataclass_fields__}
    return Settings(**known)


def settings_in_effect() -> Settings:
    """The saved settings with the environment's overrides applied."""
    saved = settings_saved()
    return Settings(
        url=os.environ.get(URL_VARIABLE) or saved.url,
        token=os.environ.get(TOKEN_VARIABLE) or saved.token,
        cluster=os.environ.get(CLUSTER_VARIABLE) or saved.cluster,
    )


def settings_save(settings: Settings) -> Path:
    """Write the file readable by its owner only; the directory is created 0700 when missing."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(asdict(settings), handle, indent=2)
    os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT: set it
    return path
