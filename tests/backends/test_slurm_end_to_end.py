"""The live scheduling pass driving the real Slurm test cluster (issue 7's acceptance).

Researchers submit with plain `sbatch --account=<allocation>`; passes adopt, rank and place their
jobs; we check what Slurm itself says (squeue, sacct) against the portal's runs.

    labXXXX (32 GPUs)        XXXX: random per test, because Slurm's accounts outlive a test
    +- vision (20)
    +- language (12)
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest

from budgets.models import Allocation, BudgetNode
from scheduling.backends.slurm_accounts import account_name, mirror_accounts
from scheduling.models import (
    Cluster,
    Decision,
    Node,
    PassStatus,
    PendingReason,
    Run,
    SchedulingPass,
    Workload,
)
from scheduling.passes import run_pass

from .conftest import SLURM_CONF, slurm_command, slurm_log_lines
from .test_slurm_live import start_controller, stop_controller

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


@pytest.fixture
def lab(slurm):  # noqa: ANN001, ANN201
    root_slug = f"lab{uuid.uuid4().hex[:6]}"
    cluster = Cluster.objects.create(
        name="slurm-test", slug="slurm-test", backend_kind="slurm", gpu_type="gpu",
        backend_settings={"slurm_conf": SLURM_CONF, "slurm_users": ["root"]},  # the default 10 s per call
        # These tests check Slurm's side of decisions the rules before issue 17 make (they fill nodes
        # exactly with 4-GPU jobs, expect reservations by the drain rule and a preemption done in the
        # pass that decides it), so the lab runs those rules and no grace period, except in
        # test_a_preemption_with_a_grace_period_signals_first_and_requeues_after_it.
        goodput_victims=False, end_work_margin=0.0, max_loss_per_gpu_s=None, rebalance_hysteresis=0.0,
        drain_release=True, short_lane_fraction=0.0, preemption_grace_s=0,
    )  # fmt: skip
    root = BudgetNode.objects.create(name="Lab", slug=root_slug, path=root_slug)
    vision = BudgetNode.objects.create(name="Vision", slug="vision", parent=root, path=f"{root_slug}/vision")
    language = BudgetNode.objects.create(
        name="Language", slug="language", parent=root, path=f"{root_slug}/language"
    )
    for node, gpus in [(root, 32), (vision, 20), (language, 12)]:
        Allocation.objects.create(node=node, cluster=cluster, gpus=Decimal(gpus))
    mirror_accounts(cluster=cluster)
    return SimpleNamespace(slurm=slurm, cluster=cluster, vision=vision, language=language)


def sbatch(lab, allocation: BudgetNode, gpus: int, *extra: str, seconds: int = 300) -> str:  # noqa: ANN001
    return lab.slurm.sbatch(f"--account={account_name(allocation.path)}", f"--gres=gpu:{gpus}", *extra,
                            seconds=seconds)  # fmt: skip


def scheduling_pass(lab, status: str = PassStatus.COMPLETED) -> SchedulingPass:  # noqa: ANN001
    outcome = run_pass(cluster_id=lab.cluster.pk)
    assert outcome.ran
    record = SchedulingPass.objects.get(pk=outcome.pass_id)
    assert record.status == status, f"the pass ended {record.status}: {record.error}"
    return record


def workload(lab, job_id: str) -> Workload:  # noqa: ANN001
    return Workload.objects.get(cluster=lab.cluster, backend_ref=job_id)


def open_run(lab, job_id: str) -> Run:  # noqa: ANN001
    return Run.objects.get(workload=workload(lab, job_id), ended_at__isnull=True)


def run_nodes(run: Run) -> str:
    return ",".join(sorted(node for node, _gpus in run.placement))


def squeue_nodes(lab, job_id: str) -> str:  # noqa: ANN001
    return ",".join(lab.slurm.backend.observed_job(_job(lab, job_id)).nodes)


def _job(lab, job_id: str):  # noqa: ANN001, ANN202
    return next(job for job in lab.slurm.backend.jobs() if str(job.job_id) == job_id)


def passes_until_running(lab, job_id: str, passes: int = 4) -> str:  # noqa: ANN001
    """Passes as the live scheduler runs them, one every ~10 s, until ``job_id`` runs (a start
    Slurm refused is planned again by the next pass); the nodes it runs on."""
    for _ in range(passes - 1):
        scheduling_pass(lab)
        try:
            return lab.slurm.wait_for_state(job_id, "RUNNING", timeout=10)
        except AssertionError:
            continue
    scheduling_pass(lab)
    return lab.slurm.wait_for_state(job_id, "RUNNING", timeout=10)


def all_running(lab, job_ids: list[str]) -> None:  # noqa: ANN001
    for job_id in job_ids:
        lab.slurm.wait_for_state(job_id, "RUNNING")


def test_fair_share_preempts_the_over_served_resumable_job_and_spares_the_protected_one(lab):
    resumable = [sbatch(lab, lab.language, 8, "--requeue", "--comment=min_runtime=2s") for _ in range(3)]
    protected = sbatch(lab, lab.language, 8, "--comment=min_runtime=1h")

    first = scheduling_pass(lab)

    assert (first.adopted_count, first.started_count) == (4, 4)
    all_running(lab, [*resumable, protected])
    for job_id in [*resumable, protected]:
        assert run_nodes(open_run(lab, job_id)) == lab.slurm.squeue(job_id)[1]
    time.sleep(2.5)  # the resumable jobs pass their minimum runtime
    newcomer = sbatch(lab, lab.vision, 8, "--requeue", "--comment=min_runtime=1h")

    scheduling_pass(lab)

    victim = Decision.objects.get(kind="preempt", workload__cluster=lab.cluster).workload
    assert victim.backend_ref in resumable
    assert lab.slurm.wait_for_state(newcomer, "RUNNING", timeout=20) == run_nodes(open_run(lab, newcomer))
    assert lab.slurm.squeue(victim.backend_ref) == ("PENDING", "")
    assert lab.slurm.squeue(protected)[0] == "RUNNING" and _job(lab, protected).restarts == 0

    scheduling_pass(lab)
    victim.refresh_from_db()
    assert victim.state == "pending"
    assert Run.objects.get(workload=victim, attempt=1).end_reason == "preempted"

    slurm_command("scancel", newcomer)  # the newcomer's owner gives the GPUs back
    lab.slurm.wait_for_state(newcomer, "CANCELLED")
    scheduling_pass(lab)

    restarted = lab.slurm.wait_for_state(victim.backend_ref, "RUNNING", timeout=20)
    assert restarted == run_nodes(Run.objects.get(workload=victim, attempt=2))
    assert_runs_match_accounting(lab)


def test_a_preemption_with_a_grace_period_signals_first_and_requeues_after_it(lab):
    Cluster.objects.filter(pk=lab.cluster.pk).update(preemption_grace_s=3)
    resumable = [
        sbatch(lab, lab.language, 8, "--requeue", "--comment=min_runtime=2s,checkpoint=1m") for _ in range(4)
    ]
    assert scheduling_pass(lab).started_count == 4
    all_running(lab, resumable)
    assert workload(lab, resumable[0]).checkpoint_interval_s == 60
    time.sleep(2.5)  # past their minimum runtime
    newcomer = sbatch(lab, lab.vision, 8, "--requeue", "--comment=min_runtime=1h")

    scheduling_pass(lab)

    preempt = Decision.objects.filter(kind="preempt", workload__cluster=lab.cluster).first()
    assert preempt is not None, why_pending(lab, newcomer)
    victim = preempt.workload
    assert preempt.grace_until is not None and preempt.finished_at is None
    assert "portal_term=requeue" in _job(lab, victim.backend_ref).admin_comment  # signalled, not requeued
    victim.refresh_from_db()
    assert victim.state == "pending"  # the portal recorded the preemption at the signal
    time.sleep(3.5)  # the grace passes

    scheduling_pass(lab)

    assert Decision.objects.get(pk=preempt.pk).finished_at is not None
    assert lab.slurm.wait_for(lambda: lab.slurm.squeue(victim.backend_ref)[0] == "PENDING", what="requeued")
    assert lab.slurm.wait_for_state(newcomer, "RUNNING", timeout=20) == run_nodes(open_run(lab, newcomer))


def why_pending(lab, job_id: str) -> str:  # noqa: ANN001
    """What the portal says about a job that was expected to move, for a failing assertion."""
    waiting = workload(lab, job_id)
    reasons = PendingReason.objects.filter(workload=waiting).values_list("code", "message")
    runs = Run.objects.filter(workload__cluster=lab.cluster).values_list(
        "workload__backend_ref", "attempt", "started_at", "protected_until", "ended_at"
    )
    passes = SchedulingPass.objects.filter(cluster=lab.cluster).values_list("started_at", "status", "error")
    decisions = Decision.objects.filter(cluster=lab.cluster).values_list(
        "kind", "workload__backend_ref", "superseded"
    )
    return (
        f"job {job_id}: {waiting.state}, held {waiting.held} ({waiting.held_note!r}), allocation "
        f"{waiting.allocation_id}; pending reasons: {list(reasons)}; runs: {list(runs)}; "
        f"decisions: {list(decisions)}; passes: {list(passes)}\n"
        f"observed now: {lab.slurm.observed(job_id)}\n{slurm_log_lines(job_id)}"
    )


def fragment_the_cluster(lab) -> SimpleNamespace:  # noqa: ANN001
    """n4 drained; six protected 4-GPU language jobs fill n1..n3; one ends on n1 and one on n2:
    8 GPUs are free, 4 on each of two nodes; then language asks for 8 on one node. (Its own
    protected work is in the way, and nothing may be preempted for it: fragmentation is the cause.
    Asked by under-served vision, the answer would be PROTECTED_WORK: preemption would help,
    but the candidates are protected.)"""
    slurm_command("scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=bad gpu")
    small = [sbatch(lab, lab.language, 4, "--comment=min_runtime=1h") for _ in range(6)]
    first = scheduling_pass(lab)
    assert first.started_count == 6, list(PendingReason.objects.values_list("code", "message"))
    all_running(lab, small)
    by_node: dict[str, list[str]] = {}
    for job_id in small:
        by_node.setdefault(lab.slurm.squeue(job_id)[1], []).append(job_id)
    assert sorted(by_node) == ["n1", "n2", "n3"]
    ended = [by_node["n1"][0], by_node["n2"][0]]
    slurm_command("scancel", *ended)
    for job_id in ended:
        lab.slurm.wait_for_state(job_id, "CANCELLED")
    big = sbatch(lab, lab.language, 8, "--comment=min_runtime=1h")
    scheduling_pass(lab)
    return SimpleNamespace(big=big, rest_of_n1=by_node["n1"][1])


def test_a_drained_nodes_gpus_leave_availability(lab):
    fragment_the_cluster(lab)

    assert not Node.objects.get(cluster=lab.cluster, name="n4").healthy
    assert "n4" not in {node for run in Run.objects.filter(cluster=lab.cluster) for node, _ in run.placement}
    assert lab.slurm.squeue_all_nodes() <= {"n1", "n2", "n3"}


def test_a_job_too_big_for_the_free_fragments_waits_fragmented_and_starts_when_a_node_frees(lab):
    fragmented = fragment_the_cluster(lab)
    reason = PendingReason.objects.get(workload=workload(lab, fragmented.big))
    assert reason.code == "FRAGMENTED", reason.message
    assert reason.message.startswith("8 GPUs are free but spread over 2 nodes")
    assert lab.slurm.squeue(fragmented.big) == ("PENDING", "")
    assert Decision.objects.filter(workload=workload(lab, fragmented.big), kind="reserve").exists()

    slurm_command("scancel", fragmented.rest_of_n1)  # the rest of n1 ends
    lab.slurm.wait_for_state(fragmented.rest_of_n1, "CANCELLED")
    scheduling_pass(lab)

    assert lab.slurm.wait_for_state(fragmented.big, "RUNNING", timeout=20) == "n1"
    assert_runs_match_accounting(lab)


def test_a_stopped_controller_pauses_the_passes_and_nothing_is_lost(lab):
    jobs = [sbatch(lab, lab.language, 8, "--comment=min_runtime=1h") for _ in range(5)]
    scheduling_pass(lab)
    runs = Run.objects.filter(cluster=lab.cluster, ended_at__isnull=True)
    running = sorted(runs.values_list("workload__backend_ref", flat=True))
    (waiting,) = set(jobs) - set(running)
    all_running(lab, running)
    assert lab.slurm.squeue(waiting) == ("PENDING", "")

    settings = {**lab.cluster.backend_settings, "timeout_s": 3}  # a stopped controller: give up sooner
    Cluster.objects.filter(pk=lab.cluster.pk).update(backend_settings=settings)
    stop_controller()
    try:
        scheduling_pass(lab, status=PassStatus.BACKEND_UNAVAILABLE)
        assert PendingReason.objects.get(workload=workload(lab, waiting)).code == "BACKEND_UNAVAILABLE"
        assert Run.objects.filter(cluster=lab.cluster, ended_at__isnull=True).count() == 4
    finally:
        start_controller(lab.slurm)
    slurm_command("scancel", running[0])
    lab.slurm.wait_for_state(running[0], "CANCELLED")

    Cluster.objects.filter(pk=lab.cluster.pk).update(backend_settings={**settings, "timeout_s": 10})
    # Right after its restart Slurm may refuse the start for a few seconds ("the DB index is being
    # set, try again in a bit"): the next pass plans it again, as the live scheduler's would.
    assert passes_until_running(lab, waiting) == run_nodes(open_run(lab, waiting))
    assert Workload.objects.filter(cluster=lab.cluster).count() == 5
    assert_runs_match_accounting(lab)


def assert_runs_match_accounting(lab) -> None:  # noqa: ANN001
    """Every run the portal recorded is a run sacct knows: same job, same nodes, same start (±5 s)."""
    since = min(Run.objects.filter(cluster=lab.cluster).values_list("started_at", flat=True)).timestamp()

    def accounted() -> dict[tuple[str, int], tuple[str, float]]:
        by_job: dict[str, list] = {}
        for run in lab.slurm.backend.runs(since=since - 60):
            if run.started_at:
                by_job.setdefault(str(run.job_id), []).append(run)
        return {
            (job_id, attempt): (run.nodes, run.started_at)
            for job_id, runs in by_job.items()
            for attempt, run in enumerate(runs, start=1)
        }

    portal = {
        (run.workload.backend_ref, run.attempt): (run_nodes(run), run.started_at.timestamp())
        for run in Run.objects.filter(cluster=lab.cluster).select_related("workload")
    }
    lab.slurm.wait_for(lambda: set(portal) <= set(accounted()), what="sacct to record every run")
    slurm_runs = accounted()
    for key, (nodes, started_at) in sorted(portal.items()):
        slurm_nodes, slurm_started_at = slurm_runs[key]
        assert ",".join(_expand(slurm_nodes)) == nodes, key
        assert abs(slurm_started_at - started_at) <= 5, (key, datetime.fromtimestamp(started_at, UTC))


def _expand(expression: str) -> tuple[str, ...]:
    from scheduling.backends.slurm_parse import expand_hostlist

    return expand_hostlist(expression)
