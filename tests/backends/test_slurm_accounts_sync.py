"""The pass mirrors the budget tree into Slurm's accounts when it changed, and only then."""

from __future__ import annotations

import logging
import uuid
from decimal import Decimal

import pytest

from budgets.models import Allocation, BudgetNode
from scheduling.backends import slurm_accounts
from scheduling.backends.slurm import SlurmCli, SlurmCommandError
from scheduling.backends.slurm_accounts import account_name
from scheduling.models import Cluster, PassStatus, SchedulingPass
from scheduling.passes import run_pass

from .conftest import SLURM_CONF, slurm_command

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


@pytest.fixture
def cluster(slurm):  # noqa: ANN001, ANN201
    cluster = Cluster.objects.create(
        name="slurm-sync", slug="slurm-sync", backend_kind="slurm", gpu_type="gpu",
        backend_settings={"slurm_conf": SLURM_CONF, "timeout_s": 5, "slurm_users": ["root"]},
    )  # fmt: skip
    root_slug = f"sync{uuid.uuid4().hex[:6]}"
    root = BudgetNode.objects.create(name="Lab", slug=root_slug, path=root_slug)
    Allocation.objects.create(node=root, cluster=cluster, gpus=Decimal(32))
    return cluster


def accounts_in_slurm() -> set[str]:
    return set(slurm_command("sacctmgr", "-n", "-P", "show", "account", "format=account").split())


def a_pass(cluster: Cluster) -> SchedulingPass:
    outcome = run_pass(cluster_id=cluster.pk)
    return SchedulingPass.objects.get(pk=outcome.pass_id)


@pytest.fixture
def sacctmgr_calls(monkeypatch) -> list[tuple[str, ...]]:  # noqa: ANN001
    calls: list[tuple[str, ...]] = []
    real_run = SlurmCli.run

    def counting_run(self: SlurmCli, *args: str) -> str:
        if args[0] == "sacctmgr":
            calls.append(args)
        return real_run(self, *args)

    monkeypatch.setattr(SlurmCli, "run", counting_run)
    return calls


def test_a_new_allocation_is_a_valid_slurm_account_after_the_next_pass(cluster):
    root = BudgetNode.objects.get(allocations__cluster=cluster)
    team = BudgetNode.objects.create(name="Team", slug="team", parent=root, path=f"{root.path}/team")
    Allocation.objects.create(node=team, cluster=cluster, gpus=Decimal(8))
    assert account_name(team.path) not in accounts_in_slurm()

    assert a_pass(cluster).status == PassStatus.COMPLETED

    assert {account_name(root.path), account_name(team.path)} <= accounts_in_slurm()
    job = slurm_command("sbatch", "--parsable", "--hold", f"--account={account_name(team.path)}",
                        "--gres=gpu:1", "--output=/dev/null", "--wrap=sleep 1")  # fmt: skip
    assert job.strip(), "sbatch accepts the new allocation as --account"
    slurm_command("scancel", job.strip().split(";")[0], check=False)


def test_passes_call_sacctmgr_only_when_the_tree_changed(cluster, sacctmgr_calls):
    a_pass(cluster)
    assert sacctmgr_calls, "the first pass mirrors the tree"
    sacctmgr_calls.clear()

    a_pass(cluster)
    assert sacctmgr_calls == []

    root = BudgetNode.objects.get(allocations__cluster=cluster)
    BudgetNode.objects.create(name="New", slug="new", parent=root, path=f"{root.path}/new")
    a_pass(cluster)
    assert any("add" in call for call in sacctmgr_calls)


def test_a_failing_mirror_is_logged_does_not_fail_the_pass_and_is_retried(cluster, monkeypatch, caplog):
    def refuse(**kwargs: object) -> None:
        raise SlurmCommandError("sacctmgr: database is read-only")

    monkeypatch.setattr(slurm_accounts, "mirror_accounts", refuse)
    with caplog.at_level(logging.ERROR, logger="scheduling.passes"):
        assert a_pass(cluster).status == PassStatus.COMPLETED
    assert "mirroring the budget tree into Slurm accounts failed" in caplog.text
    monkeypatch.undo()

    a_pass(cluster)
    assert account_name(BudgetNode.objects.get(allocations__cluster=cluster).path) in accounts_in_slurm()


def test_clusters_on_other_backends_never_call_sacctmgr(lab_simulated, sacctmgr_calls):
    run_pass(cluster_id=lab_simulated.pk)
    assert sacctmgr_calls == []


@pytest.fixture
def lab_simulated(db):  # noqa: ANN001, ANN201
    return Cluster.objects.create(name="sim", slug="sim", gpu_type="A100")
