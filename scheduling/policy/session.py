"""``PlanningSession``: everything the policy carries from one pass over a cluster to the next.

``plan(snapshot, now, config)`` without a session is a pure function of its arguments: it files
the running work, ranks and places from scratch. A caller that plans one cluster again and again
(the simulator, ~50,000 passes a month; the start options, many variants of one snapshot; a
long-lived worker) owns a session and passes it to every pass. The pass then reuses what an
earlier pass derived from the *same objects* (matched by identity, so a changed input is never
mistaken for an unchanged one) and the plans are exactly those planning without a session gives:
``tests/policy/test_session.py`` checks that against cold planning and a fresh process.

A session is not thread-safe: one caller, one thread, one cluster at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduling.policy.filing import FilingCarry
from scheduling.policy.memo import PerSource

if TYPE_CHECKING:
    from scheduling.policy.clearable import ClearableCount
    from scheduling.policy.release_order import Layout, ReleaseOrder
    from scheduling.policy.tree_shape import TreeShape


class PlanningSession:
    """What one caller carries between passes.

    - ``filing``: the running work filed by the last pass (onto nodes, victim candidates and
      concurrency limits), with the release keys and node needs derived from it (filing.py).
    - ``clearable_count``: the last pass's count of nodes a preemption could clear, per GPU type
      and size (clearable.py), recounted only where free GPUs or needs changed.
    - ``release_order``: the nodes in order of when they are wholly free (reservation.py).
    - ``node_facts``, ``tree_shapes``, ``layouts``: what a pass reads off a nodes tuple or a
      budget tree alone, per tuple object.
    """

    __slots__ = ("clearable_count", "filing", "layouts", "node_facts", "release_order", "tree_shapes")

    def __init__(self) -> None:
        self.filing = FilingCarry()
        self.clearable_count: ClearableCount | None = None
        self.release_order: ReleaseOrder | None = None
        self.node_facts: PerSource[tuple] = PerSource()
        self.tree_shapes: PerSource[dict[frozenset, TreeShape]] = PerSource()
        self.layouts: PerSource[Layout] = PerSource()
