"""The live side of issue 17: the cluster's knobs reach the policy, checkpoint intervals and idle
sessions reach the snapshot, and a preemption with a grace period is finished by later passes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from scheduling.backends.base import ActionsRefused, PreemptAction
from scheduling.backends.simulated import SimulatedBackend
from scheduling.models import Cluster, Decision, Run, UtilisationSample, Workload, WorkloadState
from scheduling.passes import run_pass
from scheduling.policy.types import GOODPUT
from scheduling.services import workload_cancel, workload_submit
from scheduling.services.runs import run_open
from scheduling.snapshot import policy_config, snapshot_build
from tests.scheduling.conftest import T0


def at(seconds: float):  # noqa: ANN201
    return T0 + timedelta(seconds=seconds)


def test_a_new_cluster_runs_the_rules_of_issue_17_as_the_simulator_measured_them(db):
    config = policy_config(Cluster(name="new", slug="new"))

    assert {name: getattr(config, name) for name in GOODPUT} == dict(GOODPUT)
    assert (config.short_max_runtime_s, config.short_max_gpus) == (1800.0, 2)


def test_a_site_changes_each_knob_and_the_pass_plans_with_it(db):
    cluster = Cluster(
        name="site", slug="site", goodput_victims=False, end_work_margin=0.2, rebalance_hysteresis=0.0,
        short_lane_fraction=0.05, short_max_runtime_s=600, short_max_gpus=1,
    )  # fmt: skip

    config = policy_config(cluster)

    assert (config.goodput_victims, config.end_work_margin, config.rebalance_hysteresis) == (False, 0.2, 0.0)
    assert (config.short_lane_fraction, config.short_max_runtime_s, config.short_max_gpus) == (0.05, 600.0, 1)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("end_work_margin", 1.5),
        ("end_work_margin", -0.1),
        ("max_loss_per_gpu_s", -1.0),
        ("rebalance_hysteresis", -1.0),
        ("short_lane_fraction", 0.9),
        ("short_max_gpus", 0),
        ("short_max_runtime_s", 10),
        ("preemption_grace_s", 7200),
        ("session_renewals_per_day", 100),
        ("session_warning_min", 0),
    ],
)
def test_an_out_of_range_knob_is_refused_next_to_its_field(db, field, value):
    cluster = Cluster(name="site", slug="site", **{field: value})

    with pytest.raises(ValidationError) as refused:
        cluster.full_clean()

    assert set(refused.value.message_dict) == {field}


def running(
    lab,
    user,
    allocation,
    *,
    klass: str = "batch",
    gpus: int = 1,
    started_s: float = 0,
    resumable: bool = False,
    checkpoint_s: int | None = None,
) -> Workload:  # noqa: ANN001
    """A workload running since ``at(started_s)`` with its open run (what a pass would have recorded)."""
    workload = Workload.objects.create(
        cluster=lab.main, allocation=allocation, owner=user, user_name=user.username, gpus=gpus,
        workload_class=klass, resumable=resumable, checkpoint_interval_s=checkpoint_s,
        state=WorkloadState.RUNNING, attempt=1, state_changed_at=at(started_s),
        submitted_at=at(started_s), queued_at=at(started_s), backend_ref=f"sim-{user.username}-{klass}-{gpus}",
    )  # fmt: skip
    run_open(workload=workload, attempt=1, placement=[["n0", gpus]], started_at=at(started_s),
             protected_until=at(started_s), funded=allocation is not None)  # fmt: skip
    return workload


def busy(workload: Workload, percent: float, *, minutes: tuple[int, ...], now_s: float) -> None:
    for minute in minutes:
        UtilisationSample.objects.create(workload=workload, cluster=workload.cluster, gpus=workload.gpus,
                                         at=at(now_s - minute * 60), gpu_utilisation=percent)  # fmt: skip


def test_checkpoint_intervals_and_idle_sessions_reach_the_policys_snapshot(lab):
    now_s = 3 * 3600.0
    idle = running(lab, lab.bob, lab.perception, klass="interactive")
    working = running(lab, lab.dave, lab.language, klass="interactive", gpus=2)
    young = running(lab, lab.alice, lab.vision, klass="interactive", started_s=now_s - 600)
    quiet_batch = running(lab, lab.dave, lab.language, resumable=True, checkpoint_s=1800, gpus=4)
    busy(idle, 4.0, minutes=(25, 15, 5), now_s=now_s)
    busy(idle, 95.0, minutes=(45,), now_s=now_s)  # busy before the window: it does not count
    busy(working, 60.0, minutes=(25, 15, 5), now_s=now_s)
    busy(young, 2.0, minutes=(5,), now_s=now_s)  # 10 minutes old: too young to call idle
    busy(quiet_batch, 1.0, minutes=(25, 15, 5), now_s=now_s)  # batch work is never a session
    queued = workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=8,
                             resumable=True, checkpoint_interval_s=900, now=at(now_s)).workload  # fmt: skip

    snapshot = snapshot_build(cluster=lab.main, now=at(now_s))

    flags = {r.id: (r.idle, r.checkpoint_interval_s) for r in snapshot.running}
    assert flags == {
        idle.pk: (True, None), working.pk: (False, None), young.pk: (False, None), quiet_batch.pk: (False, 1800.0),
    }  # fmt: skip
    (pending,) = snapshot.pending
    assert (pending.id, pending.checkpoint_interval_s) == (queued.pk, 900.0)


class GracefulSimulated(SimulatedBackend):
    """The simulated backend as a two-step (Slurm-like) backend: it records the preemptions it is
    asked to finish, and refuses the first ``refuse`` calls."""

    def __init__(self, cluster: Cluster, *, clock, refuse: int = 0) -> None:  # noqa: ANN001
        super().__init__(cluster, clock=clock)
        self.finished: list[PreemptAction] = []
        self.refuse = refuse

    def finish_preemptions(self, actions: list[PreemptAction]) -> None:
        if self.refuse:
            self.refuse -= 1
            raise ActionsRefused({action.workload_id: "the controller said no" for action in actions})
        self.finished.extend(actions)


def test_a_preemption_with_a_grace_period_is_finished_by_a_later_pass_and_retried_until_it_is(lab):
    Cluster.objects.filter(pk=lab.main.pk).update(preemption_grace_s=60)
    hogs = [
        workload_submit(actor=lab.dave, cluster=lab.main, allocation_path="lab/language", gpus=8, resumable=True,
                        min_runtime_s=600, metadata={"duration_s": 86400}, now=at(0)).workload
        for _ in range(4)
    ]  # fmt: skip
    clock = {"now": at(10)}
    backend = GracefulSimulated(lab.main, clock=lambda: clock["now"].timestamp(), refuse=1)

    def pass_at(seconds: float) -> None:
        clock["now"] = at(seconds)
        assert run_pass(cluster_id=lab.main.pk, now=at(seconds), backend=backend).ran

    pass_at(10)
    workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=8,
                    metadata={"duration_s": 600}, now=at(300))  # fmt: skip
    for seconds in (700, 710):
        pass_at(seconds)
    preempt = Decision.objects.get(kind="preempt", dispatched_at__isnull=False)
    victim = preempt.workload
    assert victim in hogs and preempt.grace_until == preempt.dispatched_at + timedelta(seconds=60)
    assert Run.objects.get(workload=victim, attempt=1).end_reason == "preempted"  # recorded at the signal

    pass_at(
        preempt.grace_until.timestamp() - T0.timestamp() - 5
    )  # still in its grace: not stopped, not restarted
    assert backend.finished == [] and Decision.objects.get(pk=preempt.pk).finished_at is None
    assert victim.pk not in {w.id for w in snapshot_build(cluster=lab.main, now=clock["now"]).pending}

    due = preempt.grace_until.timestamp() - T0.timestamp()
    pass_at(due + 1)  # due, but the backend refuses: the decision stays to finish
    assert backend.finished == [] and Decision.objects.get(pk=preempt.pk).finished_at is None
    pass_at(due + 11)  # the next pass tries again
    assert [(a.workload_id, a.requeue) for a in backend.finished] == [(victim.pk, True)]
    assert Decision.objects.get(pk=preempt.pk).finished_at == at(due + 11)
    assert victim.pk in {w.id for w in snapshot_build(cluster=lab.main, now=clock["now"]).pending}
    pass_at(due + 21)
    assert len(backend.finished) == 1  # finished once


def test_a_requeue_whose_workload_was_cancelled_in_its_grace_is_not_sent(lab):
    Cluster.objects.filter(pk=lab.main.pk).update(preemption_grace_s=60)
    for _ in range(4):
        workload_submit(actor=lab.dave, cluster=lab.main, allocation_path="lab/language", gpus=8, resumable=True,
                        min_runtime_s=600, metadata={"duration_s": 86400}, now=at(0))  # fmt: skip
    clock = {"now": at(10)}
    backend = GracefulSimulated(lab.main, clock=lambda: clock["now"].timestamp())

    def pass_at(seconds: float) -> None:
        clock["now"] = at(seconds)
        assert run_pass(cluster_id=lab.main.pk, now=at(seconds), backend=backend).ran

    pass_at(10)
    workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=8,
                    metadata={"duration_s": 600}, now=at(300))  # fmt: skip
    pass_at(700)
    preempt = Decision.objects.get(kind="preempt", dispatched_at__isnull=False)
    workload_cancel(workload=preempt.workload, actor=lab.dave, now=at(720))  # its owner gives up on it

    pass_at(780)

    assert backend.finished == []  # the cancel stops the job; no requeue of a cancelled workload
    assert Decision.objects.get(pk=preempt.pk).finished_at == at(780)


def test_an_idle_session_is_preempted_before_a_busy_one_that_would_lose_less(lab):
    """Two unprotected 8-GPU sessions of language: the older one (more work lost) sits idle (3%
    busy, reported by the backend), the younger is busy. Perception, which used nothing, needs 8
    GPUs on a full cluster: the idle session goes, though ending the busy one would lose less."""

    def submit(klass: str, minutes: int, seconds: float, **extra: object) -> Workload:
        return workload_submit(actor=lab.dave, cluster=lab.main, allocation_path="lab/language", gpus=8,
                               workload_class=klass, min_runtime_s=minutes * 60, now=at(seconds),
                               metadata={"duration_s": 86400, **extra}).workload  # fmt: skip

    def pass_at(seconds: float) -> None:
        assert run_pass(cluster_id=lab.main.pk, now=at(seconds)).ran

    idle = submit("interactive", 0, 0, utilisation=3.0)
    protected = [submit("batch", 8 * 60, 0) for _ in range(2)]
    pass_at(10)
    busy_session = submit("interactive", 0, 500, utilisation=85.0)
    pass_at(600)
    assert all(
        Run.objects.filter(workload=w, ended_at__isnull=True).exists()
        for w in [idle, busy_session, *protected]
    )
    for seconds in range(1900, 3700, 300):  # telemetry over the last 30 minutes
        pass_at(seconds)
    flags = {r.id: r.idle for r in snapshot_build(cluster=lab.main, now=at(3600)).running}
    assert (flags[idle.pk], flags[busy_session.pk]) == (True, False)
    newcomer = workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=8,
                               metadata={"duration_s": 600}, now=at(3650)).workload  # fmt: skip

    pass_at(3660)

    assert [d.workload_id for d in Decision.objects.filter(kind="preempt")] == [idle.pk]
    assert Workload.objects.get(pk=newcomer.pk).state == WorkloadState.RUNNING
    assert Workload.objects.get(pk=busy_session.pk).state == WorkloadState.RUNNING
