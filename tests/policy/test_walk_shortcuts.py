"""The walk's could-anything-start shortcuts (shortcuts.py) leave a queue only where trying every
workload in it would decide nothing more: a plan made with them is the plan made without them,
with and without the lane for short work (hypothesis)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from scheduling.policy import PolicyConfig, plan
from scheduling.policy.queues import FairShareQueue
from scheduling.policy.shortcuts import Shortcuts
from scheduling.policy.types import GOODPUT
from tests.policy.test_properties import NOW, SETTINGS, assert_reached_often, reached, snapshots

CONFIGS = {
    "bare": PolicyConfig(),
    "goodput": replace(PolicyConfig(), **GOODPUT),
    "a wide lane": replace(PolicyConfig(), **{**GOODPUT, "short_lane_fraction": 0.25}),
}


@st.composite
def long_queues(draw):  # noqa: ANN201
    """A snapshot whose queue (up to 10) is copied 2 to 6 times, so the walk often tries more
    than ``walk.CHECK_AFTER_MISSES`` in vain and asks its shortcuts; each copy comes later and
    is a debug job or not."""
    state = draw(snapshots())
    pending = list(state.pending)
    copies = draw(st.integers(2, 6))
    for copy in range(1, copies + 1):
        for workload in state.pending:
            pending.append(replace(
                workload, id=workload.id + 100 * copy, submitted_at=workload.submitted_at + copy,
                workload_class=draw(st.sampled_from(["batch", "batch", "debug"])),
            ))  # fmt: skip
    return replace(state, pending=tuple(pending))


def _never(_self, _queue, thorough=False):  # noqa: ANN001, ANN202
    """A shortcut that never answers "nothing here": the walk tries every workload."""
    return False


def _decisions(state, config: PolicyConfig):  # noqa: ANN001, ANN202
    made = plan(state, NOW, config, explain=False)
    return made.starts, made.preemptions, made.reservations


def test_a_plan_made_with_the_shortcuts_is_the_plan_made_by_trying_every_workload():
    counts = Counter()

    @given(long_queues(), st.sampled_from(sorted(CONFIGS)))
    @SETTINGS
    def check(state, name):  # noqa: ANN001, ANN202
        config, left = CONFIGS[name], []
        real = Shortcuts.nothing_more_can_start

        def spy(self, queue, thorough=False):  # noqa: ANN001, ANN202
            answer = real(self, queue, thorough)
            left.append(answer)
            return answer

        with mock.patch.object(Shortcuts, "nothing_more_can_start", spy):
            fast = _decisions(state, config)
        with mock.patch.object(Shortcuts, "nothing_more_can_start", _never), \
             mock.patch.object(Shortcuts, "nothing_to_try", _never):  # fmt: skip
            plain = _decisions(state, config)
        assert fast == plain
        reached(counts, "a queue left early", any(left))

    check()
    assert_reached_often(counts, "a queue left early")


def test_reading_one_workload_of_each_kind_answers_as_reading_the_whole_queue():
    """The shortcuts read one queued workload per allocation and kind (``grouping.KIND``) where the
    queue knows them: every answer is the one reading every queued workload gives."""
    counts = Counter()

    @given(long_queues(), st.sampled_from(sorted(CONFIGS)))
    @SETTINGS
    def check(state, name):  # noqa: ANN001, ANN202
        config = CONFIGS[name]

        by_kind = []  # (answer, read by kind?) per question

        def answers(alike):  # noqa: ANN001, ANN202
            given_answers, real = [], Shortcuts.nothing_to_try

            def spy(self, queue):  # noqa: ANN001, ANN202
                given_answers.append(real(self, queue))
                by_kind.append((given_answers[-1], queue.alike() is not None))
                return given_answers[-1]

            with mock.patch.object(Shortcuts, "nothing_to_try", spy), \
                 mock.patch.object(FairShareQueue, "alike", alike):  # fmt: skip
                return given_answers, _decisions(state, config)

        assert answers(FairShareQueue.alike) == answers(lambda _self: None)
        reached(counts, "a queue left by its kinds", (True, True) in by_kind)

    check()
    assert_reached_often(counts, "a queue left by its kinds")
