"""The pending work by kind (grouping.py): what the walk's shortcuts read instead of the queue."""

from __future__ import annotations

import copy

from scheduling.policy import PendingWorkload
from scheduling.policy.grouping import KIND, group_pending, kinds_after


def _workload(id: int, gpus: int = 1, *, allocation: str = "lab/a", **fields) -> PendingWorkload:  # noqa: ANN003
    return PendingWorkload(
        id=id, allocation=allocation, user="ann", gpus=gpus, submitted_at=float(id), **fields
    )


def test_queued_work_is_filed_by_allocation_and_kind_and_held_work_is_not():
    small, also_small, debug, wide = (
        _workload(1),
        _workload(2),
        _workload(3, workload_class="debug"),
        _workload(4, 8),
    )
    elsewhere, held = _workload(5, allocation="lab/b"), _workload(6, held=True)

    *_, kinds = group_pending([small, also_small, debug, wide, elsewhere, held])

    assert {
        allocation: {kind: list(of_kind) for kind, of_kind in by_kind.items()}
        for allocation, by_kind in kinds.items()
    } == {
        "lab/a": {KIND(small): [1, 2], KIND(debug): [3], KIND(wide): [4]},
        "lab/b": {KIND(elsewhere): [5]},
    }


def test_kinds_after_a_walk_drop_what_started_and_add_what_came_back_without_changing_the_pass_s_own():
    small, also_small, wide = _workload(1), _workload(2), _workload(4, 8)
    victim = _workload(9, allocation="lab/b", workload_class="debug")  # preempted, queued again
    restarted = _workload(10)  # a victim that started again: never queued in this grouping
    *_, kinds = group_pending([small, also_small, wide])
    before = copy.deepcopy(kinds)

    after = kinds_after(kinds, [small, wide, restarted], [victim])

    assert kinds == before
    assert {
        allocation: {kind: list(of_kind) for kind, of_kind in by_kind.items()}
        for allocation, by_kind in after.items()
    } == {
        "lab/a": {KIND(also_small): [2]},
        "lab/b": {KIND(victim): [9]},
    }
