"""The worker's memory between passes never disagrees with the database."""

from __future__ import annotations

import pytest

from scheduling.backends.simulated import simulated_node_set_health
from scheduling.bulk import Epoch
from scheduling.models import PendingReason, SchedulingPass, Workload, WorkloadState
from scheduling.services import workload_cancel, workload_hold, workload_release
from tests.scheduling.conftest import build_lab
from tests.scheduling.test_pass import pass_at, submit


def stored_reasons(cluster) -> dict:  # noqa: ANN001
    rows = (
        PendingReason.objects.filter(workload__cluster=cluster)
        .annotate(ts=Epoch("estimated_start"))
        .values_list("workload_id", "code", "message", "position", "ts")
    )
    return {wid: (code, message, position, ts) for wid, code, message, position, ts in rows}


def assert_cache_matches_the_database(lab) -> None:  # noqa: ANN001
    latest = (
        SchedulingPass.objects.filter(cluster=lab.main).order_by("-pk").values_list("pk", "nonce").first()
    )
    cached = lab.memory.reasons_get(lab.main.pk, latest)
    assert cached is not None, "the pass's memory holds what the latest pass stored"
    stored = stored_reasons(lab.main)
    assert cached.keys() == stored.keys()
    for wid, (code, message, position, estimated) in stored.items():
        assert cached[wid][:3] == (code, message, position)
        assert (cached[wid][3] is None) == (estimated is None)
    pending = set(Workload.objects.filter(state=WorkloadState.PENDING).values_list("id", flat=True))
    assert pending <= stored.keys()


@pytest.mark.django_db(transaction=True)
def test_the_reasons_the_worker_remembers_are_the_ones_stored_through_starts_requeues_holds_and_cancels():
    lab = build_lab()
    hogs = [submit(lab, lab.dave, "lab/language", 8, resumable=True, min_runtime_s=60, metadata={"duration_s": 9000})
            for _ in range(4)]  # fmt: skip
    for _ in range(3):
        submit(lab, lab.bob, "lab/vision/perception", 4, seconds=5, metadata={"duration_s": 300})

    def a_pending() -> Workload:
        return Workload.objects.filter(state=WorkloadState.PENDING).order_by("id").first()

    held: list[Workload] = []
    steps = [
        lambda: None,
        lambda: held.append(workload_hold(workload=a_pending(), actor=lab.oscar, note="data not ready")),
        lambda: workload_cancel(workload=a_pending(), actor=lab.oscar),
        lambda: simulated_node_set_health(cluster=lab.main, name="n0", healthy=False),
        lambda: workload_release(workload=held[0], actor=lab.oscar),
        lambda: simulated_node_set_health(cluster=lab.main, name="n0", healthy=True),
        lambda: None,
    ]
    for index, step in enumerate(steps):
        step()
        pass_at(lab, 10 + 100 * index)
        assert_cache_matches_the_database(lab)
    assert Workload.objects.filter(pk__in=[h.pk for h in hogs], requeue_count__gt=0).exists()


@pytest.mark.django_db(transaction=True)
def test_the_pass_task_remembers_between_the_passes_of_its_worker_process(monkeypatch):
    from scheduling.pass_cache import PassMemory
    from scheduling.tasks import run_scheduling_pass

    task = run_scheduling_pass._get_current_object()  # the one instance of this worker process
    monkeypatch.setitem(task.__dict__, "memory", PassMemory())  # this test's, empty
    lab = build_lab()
    submit(lab, lab.bob, "lab/vision/perception", 4, seconds=5, metadata={"duration_s": 300})
    waiting = workload_hold(workload=submit(lab, lab.dave, "lab/language", 8), actor=lab.dave, note="not yet")

    for _ in range(2):
        assert run_scheduling_pass(lab.main.pk) == "completed"

    latest = (
        SchedulingPass.objects.filter(cluster=lab.main).order_by("-pk").values_list("pk", "nonce").first()
    )
    remembered = task.memory.reasons_get(lab.main.pk, latest)
    assert remembered is not None, "the second pass found what the first stored, and stored its own"
    assert {wid: reason[0] for wid, reason in remembered.items()} == {
        wid: reason[0] for wid, reason in stored_reasons(lab.main).items()
    }
    assert set(task.memory.pending.get(lab.main)) == {waiting.pk}
