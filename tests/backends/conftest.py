"""The real Slurm test cluster (scripts/slurm-cluster.sh) as fixtures.

Locally the Slurm tests skip with a clear message when the cluster is not up; in CI a skip is a
failure (tests/conftest.py), so .ci/run starts the cluster first.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduling.backends.slurm import SlurmBackend, SlurmSettings
from scheduling.backends.slurm_parse import expand_hostlist

SLURM_CONF = os.environ.get("SLURM_TEST_CONF", "/var/tmp/portal-slurm/etc/slurm.conf")
TEST_ACCOUNTS = ("lab", "lab.nlp", "lab.vision")  # created by TestSlurm, outside the portal's mirror


def slurm_command(*args: str, check: bool = True, timeout: float = 20) -> str:
    env = {**os.environ, "SLURM_CONF": SLURM_CONF}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def slurm_log_lines(job_id: str, *, limit: int = 40) -> str:
    """The last lines slurmctld and every slurmd logged about a job, for a failing assertion."""
    conf = dict(line.split("=", 1) for line in Path(SLURM_CONF).read_text().splitlines() if "=" in line)
    nodes = expand_hostlist(slurm_command("sinfo", "-h", "-N", "-o", "%N", check=False).split()[0])
    paths = [conf.get("SlurmctldLogFile", "")] + [
        conf.get("SlurmdLogFile", "").replace("%n", n) for n in nodes
    ]
    about = re.compile(rf"(JobId=|JobId |job |\[){re.escape(job_id)}(\D|$)")
    found = [
        f"{Path(path).name}: {line}"
        for path in paths
        if path and Path(path).exists()
        for line in Path(path).read_text(errors="replace").splitlines(keepends=True)
        if about.search(line)
    ]
    return "".join(found[-limit:])


def slurm_is_up() -> bool:
    if not os.path.exists(SLURM_CONF):
        return False
    try:
        return "UP" in slurm_command("scontrol", "ping", check=False, timeout=5)
    except subprocess.TimeoutExpired:
        return False


class TestSlurm:
    """Drives the test cluster the way a researcher and an operator would (sbatch, scontrol)."""

    __test__ = False

    def __init__(self) -> None:
        self.settings = SlurmSettings(slurm_conf=SLURM_CONF, timeout_s=15, default_min_runtime_s=0)
        self.backend = SlurmBackend(self.settings)

    def sbatch(self, *args: str, seconds: int = 120, user: str = "root") -> str:
        """Submit the usual way (no --hold), as ``user``; returns the job id."""
        as_user = ("runuser", "-u", user, "--") if user != "root" else ()
        output = slurm_command(*as_user, "sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", *args,
                               f"--wrap=sleep {seconds}")  # fmt: skip
        return output.strip().split(";")[0]

    def squeue(self, job_id: str) -> tuple[str, str]:
        """(state, nodes) of a job as squeue prints them, e.g. ("RUNNING", "n3")."""
        line = slurm_command("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T|%N").strip()
        state, _, nodes = line.partition("|")
        return state, nodes

    def squeue_all_nodes(self) -> set[str]:
        """Every node that runs a job now, as squeue says."""
        lines = slurm_command("squeue", "-h", "-t", "R", "-o", "%N").split()
        return {node for line in lines for node in expand_hostlist(line)}

    def wait_for(self, predicate: Callable[[], object], *, timeout: float = 30, what: str = "") -> object:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what or predicate}")

    def wait_for_state(self, job_id: str, state: str, *, timeout: float = 30) -> str:
        try:
            self.wait_for(
                lambda: self.squeue(job_id)[0] == state, timeout=timeout, what=f"job {job_id} {state}"
            )
        except AssertionError as error:
            detail = slurm_command("scontrol", "show", "job", job_id, check=False)
            nodes = slurm_command("sinfo", "-N", check=False)
            raise AssertionError(f"{error}\n{detail}\n{nodes}\n{slurm_log_lines(job_id)}") from None
        return self.squeue(job_id)[1]

    def observed(self, job_id: str):  # noqa: ANN201 - ObservedJob
        return next(job for job in self.backend.observe().jobs if job.ref == job_id)

    def ensure_accounts(self) -> None:
        existing = set(slurm_command("sacctmgr", "-n", "-P", "show", "account", "format=account").split())
        for name in TEST_ACCOUNTS:
            if name not in existing:
                parent = name.rpartition(".")[0] or "root"
                slurm_command(
                    "sacctmgr", "-i", "add", "account", name, f"parent={parent}", "organization=tests"
                )
        accounts = ",".join(TEST_ACCOUNTS)
        slurm_command("sacctmgr", "-i", "add", "user", "root,nobody", f"account={accounts}", check=False)

    def clean(self) -> None:
        """Cancel every job and return every node to service, so tests do not see each other."""
        jobs = slurm_command("squeue", "-h", "-o", "%i").split()
        if jobs:
            slurm_command("scancel", *jobs, check=False)
            self.wait_for(lambda: not slurm_command("squeue", "-h", "-t", "R,CG", "-o", "%i").strip(),
                          what="jobs to end")  # fmt: skip
        for node in self.backend.nodes():
            if not node.healthy:
                slurm_command("scontrol", "update", f"NodeName={node.name}", "State=RESUME", check=False)


@pytest.fixture
def slurm() -> Iterator[TestSlurm]:
    if not slurm_is_up():
        pytest.skip(
            f"the Slurm test cluster is not running ({SLURM_CONF}); start it with `make slurm-up` "
            "(scripts/slurm-cluster.sh start, as root)"
        )
    cluster = TestSlurm()
    cluster.clean()
    cluster.ensure_accounts()
    yield cluster
    cluster.clean()
