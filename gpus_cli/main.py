"""``gpus``: the command line entry point, the session plumbing, login and whoami.

click, not argparse: nested subcommands, options read from the environment, prompts with a hidden
password and the XDG config directory come with it, and it is already installed (Celery needs it).
"""

from __future__ import annotations

import socket
import sys

import click
import requests

from gpus_cli import output
from gpus_cli.client import Api, ApiError, ExitCode
from gpus_cli.config import Settings, config_path, settings_in_effect, settings_save, settings_saved


class Session:
    """The API as the user in effect (lazily built, so ``--help`` and ``login`` need no token)."""

    def __init__(self) -> None:
        self.settings = settings_in_effect()
        self._api: Api | None = None

    @property
    def api(self) -> Api:
        if not self.settings.token:
            raise ApiError("not logged in: run `gpus login`, or set GPUS_TOKEN", ExitCode.NOT_AUTHENTICATED)
        if self._api is None:
            self._api = Api(self.settings.url, self.settings.token)
        return self._api

    def cluster(self, given: str | None) -> str:
        """The cluster named, else the configured one, else the portal's first (as the queue page)."""
        if given or self.settings.cluster:
            return given or self.settings.cluster
        clusters = self.api.get("clusters/")
        listed = clusters["results"] if isinstance(clusters, dict) else clusters
        if not listed:
            raise ApiError("the portal has no clusters yet", ExitCode.NOT_FOUND)
        return listed[0]["slug"]


pass_session = click.make_pass_decorator(Session, ensure=True)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
cluster_option = click.option("--cluster", "-c", help="Cluster slug (default: GPUS_CLUSTER, else the first).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpu-budget-portal", prog_name="gpus")
def cli() -> None:
    """Submit and follow GPU workloads, and read budgets, on the GPU budget portal.

    Exit codes: 0 ok, 1 refused (bad input), 2 usage, 3 not logged in / bad token, 4 forbidden,
    5 not found, 6 conflict (the workload's state), 7 server error, 8 server unreachable.
    """


@cli.command()
@click.option("--url", help=f"The portal's address (saved; default {Settings.url}).")
@click.option("--username", "-u", help="Your portal username (asked when missing).")
@click.option("--token", help="Save this API token instead of asking for a password.")
def login(url: str | None, username: str | None, token: str | None) -> None:
    """Get an API token with your portal password and save it (mode 0600) for the next commands."""
    saved = settings_saved()
    address = (url or settings_in_effect().url).rstrip("/")
    if not token:
        username = username or click.prompt("Username")
        password = click.prompt("Password", hide_input=True)
        token = _token_for(address, username, password)
    me = Api(address, token).get("me/")
    path = settings_save(Settings(url=address, token=token, cluster=saved.cluster))
    click.echo(f"Logged in to {address} as {me['username']}; the token is saved in {path}.")


def _token_for(url: str, username: str, password: str) -> str:
    """DRF's token for a username and password (``/api/v1/auth/token/``)."""
    try:
        body = {"username": username, "password": password, "name": f"gpus on {socket.gethostname()}"}
        return Api(url).post("auth/token/", body)["token"]
    except ApiError as error:
        if error.code == ExitCode.REFUSED:  # DRF answers a wrong password with 400
            raise ApiError(error.message, ExitCode.NOT_AUTHENTICATED, error.status) from None
        raise


@cli.command()
def logout() -> None:
    """Forget the saved token (the portal address stays)."""
    saved = settings_saved()
    settings_save(Settings(url=saved.url, cluster=saved.cluster))
    click.echo(f"Logged out; {config_path()} keeps only the portal address.")


@cli.command()
@json_option
@pass_session
def whoami(session: Session, as_json: bool) -> None:
    """Who the token belongs to, and your roles in the budget tree."""
    me = session.api.get("me/")
    if as_json:
        return output.as_json(me)
    staff = " (staff)" if me["staff"] else ""
    click.echo(f"{me['username']}{staff} on {session.settings.url}")
    output.table(["ROLE", "BUDGET NODE"], [(m["role"], m["path"]) for m in me["memberships"]],
                 empty="No memberships: you can read budgets and queues, not submit.")  # fmt: skip
    return None


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit code (ExitCode) instead of exiting, for tests and ``run``."""
    from gpus_cli import budget, workloads  # noqa: F401  (registers their commands)

    try:
        code = cli.main(args=argv, prog_name="gpus", standalone_mode=False)
    except ApiError as error:
        click.echo(f"gpus: {error.message}", err=True)
        return int(error.code)
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        return int(ExitCode.REFUSED)
    except requests.RequestException as error:  # pragma: no cover - Api wraps these
        click.echo(f"gpus: {error}", err=True)
        return int(ExitCode.UNREACHABLE)
    return code if isinstance(code, int) else int(ExitCode.OK)


def run() -> None:
    """The console script."""
    sys.exit(main())
