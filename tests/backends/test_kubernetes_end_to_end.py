"""The live scheduling pass driving Kubernetes (the fake API server over HTTP) — the Slurm scenario.

Researchers create suspended Jobs labelled with their allocation; passes adopt, rank and place
them; we check the Jobs themselves (nodeSelector, suspend) against the portal's runs. Time is a
fake clock shared by the passes and the fake API server, so nothing sleeps.

    lab (32 GPUs)   +- vision (20)   +- language (12)        4 nodes x 8 GPUs
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest

from budgets.models import Allocation, BudgetNode
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

from .kubernetes_fake import FakeKubernetes, gpu_node
from .test_kubernetes_backend import assert_schema_valid, native_job

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now.timestamp()


@pytest.fixture
def lab() -> Iterator[SimpleNamespace]:
    clock = Clock()
    fake = FakeKubernetes(clock=clock).start()
    for index in range(1, 5):
        fake.add_node(gpu_node(f"n{index}"))
    cluster = Cluster.objects.create(
        name="k8s", slug="k8s", backend_kind="kubernetes", gpu_type="gpu",
        backend_settings={"host": fake.url, "namespace": "default", "timeout_s": 3},
        # The fragmentation scenarios fill nodes exactly with 4-GPU jobs, which a lane of one GPU for
        # short work would hold back, and expect a reservation on nodes whose protected work ends
        # (the drain rule): both as before issue 17; its other rules keep a new cluster's defaults.
        short_lane_fraction=0.0, drain_release=True,
    )  # fmt: skip
    root = BudgetNode.objects.create(name="Lab", slug="lab", path="lab")
    vision = BudgetNode.objects.create(name="Vision", slug="vision", parent=root, path="lab/vision")
    language = BudgetNode.objects.create(name="Language", slug="language", parent=root, path="lab/language")
    for node, gpus in [(root, 32), (vision, 20), (language, 12)]:
        Allocation.objects.create(node=node, cluster=cluster, gpus=Decimal(gpus))
    yield SimpleNamespace(fake=fake, clock=clock, cluster=cluster)
    fake.stop()
    for manifest in fake.written:
        assert_schema_valid(manifest)


def create(lab, name: str, allocation: str, gpus: int, *, min_runtime: str, resumable: bool = False) -> str:  # noqa: ANN001
    annotations = {
        "gpu-portal.io/min-runtime": min_runtime,
        "gpu-portal.io/resumable": str(resumable).lower(),
    }
    lab.fake.create_job(native_job(name, gpus=gpus, annotations=annotations,
                                   **{"gpu-portal.io/allocation": allocation}))  # fmt: skip
    return f"default/{name}"


def pass_at(lab, seconds: float) -> SchedulingPass:  # noqa: ANN001
    lab.clock.now = T0 + timedelta(seconds=seconds)
    outcome = run_pass(cluster_id=lab.cluster.pk, now=lab.clock.now)
    assert outcome.ran
    return SchedulingPass.objects.get(pk=outcome.pass_id)


def pinned_to(lab, ref: str) -> str:  # noqa: ANN001
    """Where the Job may run, as Kubernetes will read it: its nodeSelector; "" while suspended."""
    job = lab.fake.job(ref)
    if job["spec"]["suspend"]:
        return ""
    return job["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"]


def workload(lab, ref: str) -> Workload:  # noqa: ANN001
    return Workload.objects.get(cluster=lab.cluster, backend_ref=ref)


def run_node(run: Run) -> str:
    return ",".join(sorted(node for node, _gpus in run.placement))


def test_fair_share_suspends_the_over_served_resumable_job_and_spares_the_protected_one(lab):
    resumable = [
        create(lab, f"lm-{i}", "lab.language", 8, min_runtime="60s", resumable=True) for i in range(3)
    ]
    protected = create(lab, "lm-protected", "lab.language", 8, min_runtime="1h")

    first = pass_at(lab, 10)

    assert (first.adopted_count, first.started_count) == (4, 4)
    for ref in [*resumable, protected]:
        assert pinned_to(lab, ref) == run_node(Run.objects.get(workload=workload(lab, ref)))
    newcomer = create(lab, "vision-1", "lab.vision", 8, min_runtime="1h", resumable=True)

    pass_at(lab, 120)  # past the resumable jobs' minimum runtime

    victim = Decision.objects.get(kind="preempt", workload__cluster=lab.cluster).workload
    assert victim.backend_ref in resumable and pinned_to(lab, victim.backend_ref) == ""
    assert pinned_to(lab, newcomer) == run_node(Run.objects.get(workload=victim, attempt=1))
    assert (
        pinned_to(lab, protected)
        and lab.fake.job(protected)["metadata"]["annotations"]["gpu-portal.io/attempt"] == "1"
    )

    pass_at(lab, 130)
    victim.refresh_from_db()
    assert victim.state == "pending" and Run.objects.get(workload=victim, attempt=1).end_reason == "preempted"

    lab.fake.finish(newcomer)
    pass_at(lab, 200)

    restarted = Run.objects.get(workload=victim, attempt=2)
    assert pinned_to(lab, victim.backend_ref) == run_node(restarted)
    assert_runs_match_the_jobs(lab)


def fragment_the_cluster(lab) -> SimpleNamespace:  # noqa: ANN001
    """n4 NotReady; six protected 4-GPU language jobs fill n1..n3; one ends on n1 and one on n2;
    then language asks for 8 GPUs on one node (see the Slurm scenario for why language)."""
    lab.fake.add_node(gpu_node("n4", ready=False))
    small = [create(lab, f"small-{i}", "lab.language", 4, min_runtime="1h") for i in range(6)]
    pass_at(lab, 10)
    by_node: dict[str, list[str]] = {}
    for ref in small:
        by_node.setdefault(pinned_to(lab, ref), []).append(ref)
    assert sorted(by_node) == ["n1", "n2", "n3"]
    lab.fake.finish(by_node["n1"][0])
    lab.fake.finish(by_node["n2"][0])
    big = create(lab, "language-big", "lab.language", 8, min_runtime="1h")
    pass_at(lab, 60)
    return SimpleNamespace(big=big, rest_of_n1=by_node["n1"][1])


def test_a_not_ready_nodes_gpus_leave_availability(lab):
    fragment_the_cluster(lab)

    assert not Node.objects.get(cluster=lab.cluster, name="n4").healthy
    assert "n4" not in {node for run in Run.objects.filter(cluster=lab.cluster) for node, _ in run.placement}


def test_a_job_too_big_for_the_free_fragments_waits_fragmented_and_starts_when_a_node_frees(lab):
    fragmented = fragment_the_cluster(lab)
    reason = PendingReason.objects.get(workload=workload(lab, fragmented.big))
    assert reason.code == "FRAGMENTED", reason.message
    assert pinned_to(lab, fragmented.big) == ""
    assert Decision.objects.filter(workload=workload(lab, fragmented.big), kind="reserve").exists()

    lab.fake.finish(fragmented.rest_of_n1)
    pass_at(lab, 120)

    assert pinned_to(lab, fragmented.big) == "n1"
    assert_runs_match_the_jobs(lab)


def test_an_api_server_that_does_not_answer_pauses_the_passes_and_nothing_is_lost(lab):
    refs = [create(lab, f"lm-{i}", "lab.language", 8, min_runtime="1h") for i in range(5)]
    pass_at(lab, 10)
    (waiting,) = [ref for ref in refs if not pinned_to(lab, ref)]

    lab.fake.unavailable = True
    paused = pass_at(lab, 20)

    assert paused.status == PassStatus.BACKEND_UNAVAILABLE
    assert PendingReason.objects.get(workload=workload(lab, waiting)).code == "BACKEND_UNAVAILABLE"
    assert Run.objects.filter(cluster=lab.cluster, ended_at__isnull=True).count() == 4
    lab.fake.unavailable = False
    lab.fake.finish(next(ref for ref in refs if pinned_to(lab, ref)))

    resumed = pass_at(lab, 30)

    assert resumed.status == PassStatus.COMPLETED and pinned_to(lab, waiting)
    assert Workload.objects.filter(cluster=lab.cluster).count() == 5
    assert_runs_match_the_jobs(lab)


def assert_runs_match_the_jobs(lab) -> None:  # noqa: ANN001
    """Each Job's latest run in the portal is where and when Kubernetes says the Job runs."""
    for ref, job in ((f"{ns}/{name}", job) for (ns, name), job in lab.fake.jobs.items()):
        runs = Run.objects.filter(workload__backend_ref=ref, workload__cluster=lab.cluster).order_by(
            "attempt"
        )
        if not job["status"].get("startTime"):
            assert all(run.ended_at is not None for run in runs), ref
            continue
        latest = runs.last()
        annotations = job["metadata"]["annotations"]
        assert (latest.attempt, run_node(latest)) == (
            int(annotations["gpu-portal.io/attempt"]),
            pinned_to(lab, ref),
        )
        assert latest.started_at.strftime("%Y-%m-%dT%H:%M:%SZ") == job["status"]["startTime"], ref


def test_a_pending_job_carries_the_portals_reason_as_a_condition_and_an_event(lab):
    for i in range(4):
        create(lab, f"lm-{i}", "lab.language", 8, min_runtime="1h")
    waiting = create(lab, "lm-late", "lab.language", 8, min_runtime="1h")

    pass_at(lab, 10)
    pass_at(lab, 20)

    reason = PendingReason.objects.get(workload=workload(lab, waiting))
    (condition,) = [
        c for c in lab.fake.job(waiting)["status"]["conditions"] if c["type"] == "GPUPortalPending"
    ]
    assert condition["status"] == "True" and condition["message"].startswith(
        f"{reason.code} #{reason.position}"
    )
    assert f"/scheduling/workloads/{reason.workload_id}/" in condition["message"]
    events = [e for e in lab.fake.events if e["involvedObject"]["name"] == "lm-late"]
    assert events and events[-1]["message"] == condition["message"]
    assert events[-1]["source"]["component"] == "gpu-portal"
    written = len(lab.fake.events)
    pass_at(lab, 30)
    assert len(lab.fake.events) == written, "an unchanged reason is not written again"


def test_a_job_its_user_suspends_stays_suspended_and_is_shown_held(lab):
    ref = create(lab, "lm-mine", "lab.language", 8, min_runtime="1h")
    pass_at(lab, 10)
    assert pinned_to(lab, ref)

    lab.fake.suspend(ref)
    pass_at(lab, 20)
    pass_at(lab, 30)

    assert lab.fake.job(ref)["spec"]["suspend"] is True
    mine = workload(lab, ref)
    assert mine.state == "pending" and mine.held
    assert PendingReason.objects.get(workload=mine).code == "HELD"
