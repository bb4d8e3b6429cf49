"""A backend that refuses some actions: the rest go through, nothing is recorded that did not
happen, and a workload whose start keeps being refused is held with the backend's words."""

from __future__ import annotations

from scheduling.dispatch import START_REFUSALS_TO_HOLD
from scheduling.models import Decision, PassStatus, PendingReason, Run, WorkloadState
from tests.scheduling.test_pass import pass_at, state_of, submit


def refuse_starts(lab, *workloads) -> None:  # noqa: ANN001
    lab.main.backend_settings = {"refuse_starts": [w.pk for w in workloads]}
    lab.main.save()


def refused_until_held(lab):  # noqa: ANN001, ANN201
    """A 4-GPU workload whose every start the backend refuses, after the passes that hold it."""
    stuck = submit(lab, lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 3600})
    refuse_starts(lab, stuck)
    for step in range(START_REFUSALS_TO_HOLD):
        pass_at(lab, 10 * (step + 1))
    stuck.refresh_from_db()
    return stuck


def test_a_refused_start_opens_no_run_and_the_other_starts_go_through(lab):
    refused = submit(lab, lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 3600})
    fine = submit(lab, lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 3600})
    refuse_starts(lab, refused)

    record = pass_at(lab, 10)

    assert record.status == PassStatus.COMPLETED
    assert (state_of(refused), state_of(fine)) == (WorkloadState.PENDING, WorkloadState.RUNNING)
    assert not Run.objects.filter(workload=refused).exists()
    decision = Decision.objects.get(workload=refused, kind="start")
    assert decision.superseded and decision.dispatched_at is None
    assert "refuses to start it" in decision.reason
    refused.refresh_from_db()
    assert refused.metadata["start_refusals"] == 1 and not refused.held
    # The next pass reconciles no phantom preemption and tries again.
    pass_at(lab, 20)
    assert state_of(refused) == WorkloadState.PENDING
    assert not Run.objects.filter(workload=refused).exists()
    assert Decision.objects.filter(workload=refused, kind="start").count() == 2


def test_a_start_refused_again_and_again_is_held_with_the_backend_s_words(lab):
    stuck = refused_until_held(lab)
    assert stuck.held and stuck.held_by == "scheduler"
    assert stuck.held_note.startswith(f"The backend refused to start it {START_REFUSALS_TO_HOLD} times")

    pass_at(lab, 100)
    assert Decision.objects.filter(workload=stuck, kind="start").count() == START_REFUSALS_TO_HOLD
    reason = PendingReason.objects.get(workload=stuck)
    assert reason.code == "HELD" and "held by scheduler" in reason.message
    assert "refuses to start it" in reason.message  # the owner reads the backend's words


def test_refusals_count_in_a_row_an_accepted_start_forgets_them(lab):
    flaky = submit(lab, lab.bob, "lab/vision/perception", 4, metadata={"duration_s": 3600})
    refuse_starts(lab, flaky)
    pass_at(lab, 10)
    refuse_starts(lab)
    pass_at(lab, 20)
    flaky.refresh_from_db()
    assert flaky.state == WorkloadState.RUNNING and "start_refusals" not in flaky.metadata
    assert Run.objects.filter(workload=flaky).count() == 1


def test_releasing_a_workload_held_for_refusals_gives_the_backend_new_tries(lab):
    from scheduling.services.workloads import workload_release

    stuck = refused_until_held(lab)
    workload_release(workload=stuck, actor=lab.bob)
    pass_at(lab, 100)
    stuck.refresh_from_db()
    assert not stuck.held and stuck.metadata["start_refusals"] == 1
