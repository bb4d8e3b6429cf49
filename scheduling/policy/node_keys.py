"""What passes derive from one node's occupants alone, kept by the filing carry (filing.py) while
those occupants stay: when the node is wholly free (``ReleaseKeys``, read by reservation.py) and
which funded allocations must be preempted to clear it (``KeptNeeds``, read by preempting.py)."""

from __future__ import annotations


class ReleaseKeys(dict[str, "tuple[float, float] | None"]):
    """node -> what ``reservation.ReleaseProfile`` worked out from its occupants alone (see
    there), kept while those occupants stay. ``drop`` forgets a node's key and logs the node in
    ``dropped``: an order kept by these keys (``release_order.Ranks``) looks again only at the nodes
    logged since it last looked. ``clear`` (or a log grown long) starts a new log, counted by
    ``epoch``: an order that read an older one looks at every node again."""

    __slots__ = ("dropped", "epoch")

    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[str] = []
        self.epoch = 0

    def drop(self, name: str) -> None:
        self.pop(name, None)
        self.dropped.append(name)

    def clear(self) -> None:
        super().clear()
        self.restart()

    def restart(self) -> None:
        """Start a new log (the keys stay)."""
        self.dropped = []
        self.epoch += 1


class KeptNeeds:
    """What ``preempting.Preemptor.needs_by_node`` worked out for a node from its occupants alone, as
    the base holds them: filled by the passes for nodes they did not change, emptied here for a
    node whenever its occupants change (shared by the passes, like the release keys).

    ``settled``: node -> the funded allocations to preempt to clear it, for nodes whose work all
    started before the pass that worked it out and none of it protected then: that holds at every
    later ``now`` (a base never goes back in time). ``blocked``: node -> until when protected work
    keeps it from being cleared (worked out again from then on). Both for ``shielding`` only."""

    __slots__ = ("blocked", "settled", "shielding")

    def __init__(self) -> None:
        self.settled: dict[str, frozenset] = {}
        self.blocked: dict[str, float] = {}
        self.shielding: bool | None = None

    def forget(self, name: str) -> None:
        self.settled.pop(name, None)
        self.blocked.pop(name, None)
