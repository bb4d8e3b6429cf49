"""The mirror task mirrors the budget tree into Slurm's accounts when it changed, and only then;
passes never call sacctmgr (issue 18: the mirror is a Celery task of its own)."""

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
from scheduling.services.slurm_mirror import slurm_mirror_run

from .conftest import SLURM_CONF, slurm_command

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


@pytest.fixture
def cluster(slurm):  # noqa: ANN001, ANN201
    cluster = Cluster.objects.create(
        name="slurm-sync", slug="slurm-sync", backend_kind="slurm", gpu_type="gpu",
        backend_settings={"slurm_conf": SLURM_CONF, "slurm_users": ["root"]},
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


def mirror(cluster: Cluster) -> str:
    return slurm_mirror_run(cluster_id=cluster.pk)


def test_a_new_allocation_is_a_valid_slurm_account_after_the_next_mirror(cluster):
    root = BudgetNode.objects.get(allocations__cluster=cluster)
    team = BudgetNode.objects.create(name="Team", slug="team", parent=root, path=f"{root.path}/team")
    Allocation.objects.create(node=team, cluster=cluster, gpus=Decimal(8))
    assert account_name(team.path) not in accounts_in_slurm()

    assert mirror(cluster) == "mirrored"

    assert {account_name(root.path), account_name(team.path)} <= accounts_in_slurm()
    job = slurm_command("sbatch", "--parsable", "--hold", f"--account={account_name(team.path)}",
                        "--gres=gpu:1", "--output=/dev/null", "--wrap=sleep 1")  # fmt: skip
    assert job.strip(), "sbatch accepts the new allocation as --account"
    slurm_command("scancel", job.strip().split(";")[0], check=False)


def test_the_mirror_calls_sacctmgr_only_when_the_tree_changed_and_passes_never(cluster, sacctmgr_calls):
    assert a_pass(cluster).status == PassStatus.COMPLETED
    assert sacctmgr_calls == [], "a pass never mirrors"
    mirror(cluster)
    assert sacctmgr_calls, "the first mirror writes the tree"
    sacctmgr_calls.clear()

    assert mirror(cluster) == "unchanged"
    assert sacctmgr_calls == []

    root = BudgetNode.objects.get(allocations__cluster=cluster)
    unfunded = BudgetNode.objects.create(name="New", slug="new", parent=root, path=f"{root.path}/new")
    assert mirror(cluster) == "unchanged", "a node with no budget on this cluster is not an account"
    Allocation.objects.create(node=unfunded, cluster=cluster, gpus=Decimal(2))
    assert mirror(cluster) == "mirrored"
    assert [call[:3] for call in sacctmgr_calls if "-i" in call] == [("sacctmgr", "-i", "load")]


def test_a_failing_mirror_is_logged_and_retried_by_the_next_run(cluster, monkeypatch, caplog):
    def refuse(**kwargs: object) -> None:
        raise SlurmCommandError("sacctmgr: database is read-only")

    monkeypatch.setattr(slurm_accounts, "mirror_accounts", refuse)
    with caplog.at_level(logging.ERROR, logger="scheduling.services.slurm_mirror"):
        assert mirror(cluster) == "failed"
    assert "mirroring the budget tree into Slurm accounts failed" in caplog.text
    monkeypatch.undo()

    assert mirror(cluster) == "mirrored"
    assert account_name(BudgetNode.objects.get(allocations__cluster=cluster).path) in accounts_in_slurm()


def test_clusters_on_other_backends_never_call_sacctmgr(lab_simulated, sacctmgr_calls):
    run_pass(cluster_id=lab_simulated.pk)
    assert sacctmgr_calls == []


@pytest.fixture
def lab_simulated(db):  # noqa: ANN001, ANN201
    return Cluster.objects.create(name="sim", slug="sim", gpu_type="A100")


@pytest.mark.celery
@pytest.mark.django_db(transaction=True)
def test_the_mirror_task_runs_on_a_real_worker_outside_any_pass(slurm):  # noqa: ANN001
    from django.conf import settings
    from django.db import connections

    from tests.scheduling.processes import kill, wait_for
    from tests.scheduling.test_celery_worker import start_worker

    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.skip("needs REDIS_URL (the real Redis broker); .ci/run sets it")
    cluster = Cluster.objects.create(
        name="slurm-task", slug="slurm-task", backend_kind="slurm", gpu_type="gpu",
        backend_settings={"slurm_conf": SLURM_CONF, "slurm_users": ["root"]},
    )  # fmt: skip
    root_slug = f"task{uuid.uuid4().hex[:6]}"
    root = BudgetNode.objects.create(name="Lab", slug=root_slug, path=root_slug)
    Allocation.objects.create(node=root, cluster=cluster, gpus=Decimal(16))
    queue = f"test-mirror-{uuid.uuid4().hex[:8]}"
    process = start_worker(queue)
    try:
        from scheduling.tasks import mirror_slurm_accounts

        mirror_slurm_accounts.apply_async(args=[cluster.pk], queue=queue, expires=60)
        wait_for(
            lambda: root_slug in accounts_in_slurm(), timeout=60, what="the worker's mirror", process=process
        )
    finally:
        kill(process)
        connections.close_all()
    assert SchedulingPass.objects.filter(cluster=cluster).count() == 0
