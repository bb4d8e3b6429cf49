"""Reads for the queue and "why is my job pending?" pages (and their API).

The queue is the cluster's pending workloads in scheduling order: the position the last pass
gave each one (``PendingReason.position``), workloads without a reason yet last, then submit time
and id. Fixed query counts whatever the queue length; tests pin them.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from django.core.cache import cache
from django.db.models import Count, F, QuerySet, Sum

from budgets.models import Allocation, BudgetNode
from budgets.paths import subtree_q
from portal.metrics import fair_share_ratio
from scheduling.accounting import usage_in_window
from scheduling.models import (
    Cluster,
    Decision,
    EndReason,
    Run,
    SchedulingPass,
    Workload,
    WorkloadClass,
    WorkloadState,
)
from scheduling.pass_cache import PendingMemory
from scheduling.policy.session import PlanningSession
from scheduling.wording import lost_work, preemption_words, reason_name

if TYPE_CHECKING:
    from scheduling.policy import Plan, PolicyConfig, Snapshot

QUEUE_LIMIT = 200
QUEUE_PAGE_SIZE = 25  # rows per page of the queue page: a phone shows them as cards
QUEUE_FILTERS = ("allocation", "user", "class", "reason")
QUEUE_FIELDS = (
    "id", "cluster_id", "name", "owner", "user_name", "gpus", "workload_class", "state", "held", "queued_at",
    "submitted_at",
    "allocation__path", "pending_reason__code", "pending_reason__message", "pending_reason__position",
    "pending_reason__estimated_start",
)  # fmt: skip


# --- the queue ---------------------------------------------------------------------------------------


def clean_queue_filters(params: Mapping[str, str]) -> dict[str, str]:
    """Only known filters with a value; ``class`` must be a workload class."""
    filters = {key: params.get(key, "").strip() for key in QUEUE_FILTERS}
    if filters["class"] not in WorkloadClass.values:
        filters["class"] = ""
    return {key: value for key, value in filters.items() if value}


def queue_rows(*, cluster: Cluster, filters: Mapping[str, str]) -> QuerySet[Workload]:
    """The first :data:`QUEUE_LIMIT` of :func:`queue_ordered` (the API's list)."""
    return queue_ordered(cluster=cluster, filters=filters)[:QUEUE_LIMIT]


def queue_ordered(*, cluster: Cluster, filters: Mapping[str, str]) -> QuerySet[Workload]:
    """Pending workloads in scheduling order, filtered; an allocation filter includes its subtree."""
    queryset = (
        Workload.objects.filter(cluster=cluster, state=WorkloadState.PENDING)
        .select_related("allocation", "pending_reason")
        .only(*QUEUE_FIELDS)  # no JSON metadata or reason params decoded per row
    )
    if allocation := filters.get("allocation"):
        queryset = queryset.filter(subtree_q(allocation.rstrip("/"), field="allocation__path"))
    if user := filters.get("user"):
        queryset = queryset.filter(user_name=user)
    if workload_class := filters.get("class"):
        queryset = queryset.filter(workload_class=workload_class)
    if reason := filters.get("reason"):
        queryset = queryset.filter(pending_reason__code=reason)
    return queryset.order_by(F("pending_reason__position").asc(nulls_last=True), "submitted_at", "id")


@dataclass
class QueuePage:
    """One page of the queue: its rows, where it starts (0-based) and whether more follow."""

    rows: list[Workload]
    number: int
    offset: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def first(self) -> int:
        return self.offset + 1

    @property
    def last(self) -> int:
        return self.offset + len(self.rows)


def queue_page_number(params: Mapping[str, str]) -> int:
    """``?page=`` as a page number from 1; anything else is the first page."""
    raw = params.get("page", "")
    return int(raw) if raw.isdigit() and int(raw) >= 1 else 1


def queue_page(*, cluster: Cluster, filters: Mapping[str, str], number: int, now: datetime) -> QueuePage:
    """The ``number``-th page of :func:`queue_ordered` (one query: a row past the page says more follow)."""
    offset = (number - 1) * QUEUE_PAGE_SIZE
    ordered = queue_ordered(cluster=cluster, filters=filters)
    rows = with_waits(ordered[offset : offset + QUEUE_PAGE_SIZE + 1], now=now)
    return QueuePage(rows[:QUEUE_PAGE_SIZE], number, offset, len(rows) > QUEUE_PAGE_SIZE)


def queue_summary(*, cluster: Cluster) -> dict[str, int]:
    """Pending count and pending GPUs on the cluster (unfiltered), one query."""
    return Workload.objects.filter(cluster=cluster, state=WorkloadState.PENDING).aggregate(
        workloads=Count("id"), gpus=Sum("gpus", default=0)
    )


def with_waits(rows: QuerySet[Workload], *, now: datetime) -> list[Workload]:
    """The rows, each with ``wait_s``: seconds since it was last queued (submit or requeue)."""
    listed = list(rows)
    for workload in listed:
        workload.wait_s = max((now - workload.queued_at).total_seconds(), 0.0)  # type: ignore[attr-defined]  # for display only
    return listed


# --- one workload ----------------------------------------------------------------------------------------


@dataclass
class BranchShare:
    """One branch under the first shared ancestor: its fair-share ratio and how many are ahead from it."""

    path: str
    fair_share_ratio: float | None
    ahead: int
    mine: bool = False


@dataclass
class FairTreeComparison:
    """Where the workload's allocation stands against the allocations ahead of it (Slurm Fair Tree).

    For every workload ahead, find the first ancestor shared with ours; the two children of that
    ancestor on each side are compared by fair-share ratio (usage share / budget share among
    siblings, lower goes first). Same allocation: they are ordered by user share, then submit time.
    """

    ancestor_rows: dict[str, list[BranchShare]] = field(default_factory=dict)
    same_allocation_ahead: int = 0
    ahead_total: int = 0


@dataclass
class WorkloadDetail:
    workload: Workload
    runs: list[Run]
    decisions: list[Decision]
    open_run: Run | None
    comparison: FairTreeComparison | None
    reason_changes: list = field(default_factory=list)  # portal.ReasonChange, newest first
    last_preemption: str = ""  # what its latest preemption threw away, in words (requeued or ended)


def workload_detail(*, workload: Workload, now: datetime) -> WorkloadDetail:
    runs = list(workload.runs.order_by("attempt"))
    decisions = list(workload.decisions.order_by("-created_at", "-id")[:50])
    open_run = next((run for run in runs if run.ended_at is None), None)
    comparison = None
    if workload.state == WorkloadState.PENDING and workload.allocation_id:
        comparison = fair_tree_comparison(workload=workload, now=now)
    reason_changes = list(workload.reason_changes.order_by("-at", "-id")[:50])
    return WorkloadDetail(
        workload, runs, decisions, open_run, comparison, reason_changes, last_preemption_words(workload, runs)
    )


def last_preemption_words(workload: Workload, runs: list[Run]) -> str:
    """For a workload waiting again after a preemption, or ended by one: what that preemption threw
    away ("preempted after 3 h 10 min; it resumes from its last checkpoint (10 min ago, ...)")."""
    if workload.state not in (WorkloadState.PENDING, WorkloadState.PREEMPTED) or not runs:
        return ""
    last = runs[-1]
    if last.end_reason != EndReason.PREEMPTED or last.ended_at is None:
        return ""
    interval = float(workload.checkpoint_interval_s) if workload.checkpoint_interval_s else None
    lost = lost_work(gpus=last.gpus, ran_s=(last.ended_at - last.started_at).total_seconds(),
                     resumable=workload.resumable, checkpoint_interval_s=interval)  # fmt: skip
    words = preemption_words(lost)
    return words[0].upper() + words[1:] + "."


def first_shared_ancestor(mine: str, theirs: str) -> tuple[str, str, str]:
    """(shared ancestor path or "", our branch under it, their branch under it).

    ``a/b/c`` vs ``a/d``: ("a", "a/b", "a/d"). Same path: (path, path, path).
    """
    ours, other = mine.split("/"), theirs.split("/")
    common = 0
    while common < min(len(ours), len(other)) and ours[common] == other[common]:
        common += 1
    if common == len(ours) == len(other):
        return mine, mine, theirs
    ancestor = "/".join(ours[:common])
    return ancestor, "/".join(ours[: common + 1]), "/".join(other[: common + 1])


def fair_tree_comparison(*, workload: Workload, now: datetime) -> FairTreeComparison:
    position = getattr(getattr(workload, "pending_reason", None), "position", None)
    ahead = Workload.objects.filter(
        cluster=workload.cluster_id, state=WorkloadState.PENDING, pending_reason__position__lt=position or 0
    ).values_list("allocation__path", flat=True)
    from scheduling.snapshot import UNALLOCATED  # here: scheduling.snapshot imports this module

    mine = workload.allocation.path if workload.allocation is not None else UNALLOCATED
    branches: dict[str, dict[str, int]] = {}
    result = FairTreeComparison()
    for path in ahead:
        result.ahead_total += 1
        if not path or path == mine:
            result.same_allocation_ahead += int(path == mine)
            continue
        ancestor, _, theirs = first_shared_ancestor(mine, path)
        branches.setdefault(ancestor, {}).setdefault(theirs, 0)
        branches[ancestor][theirs] += 1
    if branches:
        ratios = fair_share_now(cluster=workload.cluster, now=now)
        for ancestor, counts in sorted(branches.items(), key=lambda item: -len(item[0])):
            _, own_branch, _ = first_shared_ancestor(mine, next(iter(counts)))
            rows = [BranchShare(own_branch, ratios.get(own_branch), 0, mine=True)]
            rows += [BranchShare(p, ratios.get(p), n) for p, n in sorted(counts.items(), key=lambda i: -i[1])]
            result.ancestor_rows[ancestor or "(top level)"] = rows
    return result


def fair_share_now(*, cluster: Cluster, now: datetime) -> dict[str, float | None]:
    """Fair-share ratio (usage share / budget share among siblings) per budget node path, now.

    The latest finished pass's own ratios (what ranked the queue, projected charges included) when
    it recorded them; otherwise computed here from the windowed usage rollup and the budgets.
    """
    latest = (
        SchedulingPass.objects.filter(cluster=cluster, finished_at__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("fair_share", flat=True)
        .first()
    )
    if latest:
        return dict(latest)
    return _computed_ratios(cluster=cluster, now=now)


def _computed_ratios(*, cluster: Cluster, now: datetime) -> dict[str, float | None]:
    """Fair-share ratio of every budget node among its siblings (subtree usage in the window)."""
    nodes = list(BudgetNode.objects.values_list("id", "path", "parent_id"))
    budgets = {
        k: float(v) for k, v in Allocation.objects.filter(cluster=cluster).values_list("node_id", "gpus")
    }
    usage = usage_in_window(cluster_id=cluster.pk, now=now, window=timedelta(days=cluster.window_days))
    path_of = {pk: path for pk, path, _ in nodes}
    subtree_usage: dict[str, float] = {}
    for pk, used in usage.items():
        if pk in path_of:
            parts = path_of[pk].split("/")
            for depth in range(1, len(parts) + 1):
                prefix = "/".join(parts[:depth])
                subtree_usage[prefix] = subtree_usage.get(prefix, 0.0) + used
    siblings: dict[int | None, list[tuple[int, str]]] = {}
    for pk, path, parent_id in nodes:
        siblings.setdefault(parent_id, []).append((pk, path))
    ratios: dict[str, float | None] = {}
    for group in siblings.values():
        total_usage = sum(subtree_usage.get(path, 0.0) for _, path in group)
        total_budget = sum(budgets.get(pk, 0.0) for pk, _ in group)
        for pk, path in group:
            ratios[path] = fair_share_ratio(
                usage=subtree_usage.get(path, 0.0), budget=budgets.get(pk, 0.0),
                sibling_usage=total_usage, sibling_budget=total_budget,
            )  # fmt: skip
    return ratios


# --- options that would start it sooner (computed by the policy) -----------------------------------------


@dataclass(frozen=True)
class StartOption:
    label: str
    starts_now: bool
    estimated_start: datetime | None
    detail: str
    changes: Mapping[str, object] | None = None  # the workload fields it changes ("resubmit like this")
    code: str | None = None  # the reason it would still wait (the API's ``code``; the page says its name)

    @property
    def phrase(self) -> str:
        """The label inside a sentence: "with 4 GPUs", "on H100"."""
        return self.label[:1].lower() + self.label[1:]

    @property
    def changes_json(self) -> str:
        return json.dumps(dict(self.changes or {}), sort_keys=True)


AS_IT_IS = "As it is"


def start_options(
    *,
    workload: Workload,
    now: datetime,
    latest_pass: tuple[int, str] | None = None,
    memory: OptionsMemory | None = None,
) -> list[StartOption]:
    """What the policy says would start the workload sooner, on the cluster as it is now.

    One snapshot read, then :func:`scheduling.policy.options.decide_start_options` plans the
    workload as it is and each variant (fewer GPUs, minimum runtime 0, unfunded, another GPU type)
    with the same ``plan()`` the pass runs. When it would start in the next pass anyway, the one
    option returned is "As it is". With ``latest_pass`` (the cluster's latest pass: id, nonce) the
    snapshot is the one :func:`options_snapshot_for_pass` shares among the workloads viewed after
    it, and so is its plan as it is, from the second workload on (the first plans only its own).
    ``memory``: what this process's earlier reads remember (:class:`OptionsMemory`); None: a
    fresh one, so the pending workloads are read in full and nothing is shared.
    """
    if workload.state != WorkloadState.PENDING or workload.held:  # (held: no options, no start)
        return []
    # Like a pass, the read and the re-plans allocate a few objects per pending workload and free
    # none until they end: a cyclic collection in between only walks them (tens of ms at p95).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _start_options(
            workload=workload, now=now, latest_pass=latest_pass, memory=memory or OptionsMemory()
        )
    finally:
        if collecting:
            gc.enable()


def _start_options(
    *, workload: Workload, now: datetime, latest_pass: tuple[int, str] | None, memory: OptionsMemory
) -> list[StartOption]:
    from scheduling.policy import plan
    from scheduling.policy.options import decide_start_options

    if latest_pass is None:
        (snapshot, config), read_at = (
            options_snapshot(cluster=workload.cluster, now=now, memory=memory.pending),
            now,
        )
        as_planned, session = None, None
    else:
        shared = options_snapshot_for_pass(workload=workload, latest_pass=latest_pass, now=now, memory=memory)
        snapshot, config, read_at = shared.snapshot, shared.config, shared.read_at
        if shared.as_planned is None and shared.uses:
            shared.as_planned = plan(snapshot, read_at.timestamp(), config, session=shared.session)
        shared.uses += 1
        as_planned, session = shared.as_planned, shared.session
    as_it_is, options = decide_start_options(
        snapshot, workload.pk, read_at.timestamp(), config, as_planned=as_planned, session=session
    )
    if as_it_is is not None and as_it_is.starts_now:
        return [StartOption(AS_IT_IS, True, None, "would start in the next pass")]
    return [
        StartOption(
            option.label[:1].upper() + option.label[1:],
            option.starts_now,
            datetime.fromtimestamp(option.estimated_start, tz=UTC) if option.estimated_start else None,
            "would start in the next pass" if option.starts_now else _still_waits(option.code),
            dict(option.changes),
            None if option.starts_now else option.code,
        )
        for option in options
    ]


def _still_waits(code: str | None) -> str:
    """The words for an option that would still wait ("would still wait: nodes held for a larger job")."""
    name = reason_name(code)
    return f"would still wait: {name[:1].lower()}{name[1:]}"


def start_options_for_pass(*, workload: Workload, now: datetime, memory: OptionsMemory) -> list[StartOption]:
    """:func:`start_options`, remembered until the cluster's next pass.

    The answer only changes when a pass changes the cluster, so people reloading the page (or many
    people looking at one job) cost one set of re-plans per pass, not one per view; and the
    workloads first viewed after one pass share one snapshot read (:func:`options_snapshot_for_pass`).
    """
    latest = (
        SchedulingPass.objects.filter(cluster_id=workload.cluster_id, finished_at__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("pk", "nonce")
        .first()
    )
    key = f"start-options:{workload.pk}:{latest[0] if latest else None}"
    options = cache.get(key)
    if options is None:
        options = start_options(workload=workload, now=now, latest_pass=latest, memory=memory)
        cache.set(key, options, timeout=max(workload.cluster.pass_interval_s * 6, 60))
    return options


def options_snapshot(
    *, cluster: Cluster, now: datetime, memory: PendingMemory | None = None
) -> tuple[Snapshot, PolicyConfig]:
    """The pass's own snapshot (allocations and users ranked by the rollups, as the pass ranks them) and config.

    With ``memory``, the pending workloads read are remembered there, so the next read fetches in
    full only the ones new or changed since (checked against the database on every read, as the
    pass does)."""
    from scheduling.snapshot import policy_config, snapshot_build

    return snapshot_build(cluster=cluster, now=now, memory=memory), policy_config(cluster)


@dataclass
class PassSnapshot:
    """One snapshot shared by the workloads whose options are first asked for after a pass."""

    key: tuple  # (cluster id, cluster created_at, pass id, pass nonce)
    snapshot: Snapshot
    config: PolicyConfig
    read_at: datetime
    uses: int = 0  # workloads planned on it so far
    as_planned: Plan | None = None  # plan(snapshot) with every reason, once a second workload needs it
    # carried by every plan of this snapshot (its running work, nodes and tree are the same objects)
    session: PlanningSession = field(default_factory=PlanningSession)


@dataclass
class OptionsMemory:
    """What a process answering for the start options remembers between requests: the pending
    workloads its last read found (:class:`scheduling.pass_cache.PendingMemory`) and, per cluster,
    the snapshot shared since the latest pass (:func:`options_snapshot_for_pass`). The web process
    keeps one (``scheduling.apps.options_memory``); benchmarks and tests make their own."""

    pending: PendingMemory = field(default_factory=PendingMemory)
    snapshots: dict[int, PassSnapshot] = field(default_factory=dict)  # cluster id -> the latest one only


def options_snapshot_for_pass(
    *, workload: Workload, latest_pass: tuple[int, str], now: datetime, memory: OptionsMemory
) -> PassSnapshot:
    """:func:`options_snapshot` read once after the cluster's pass ``latest_pass`` (id, nonce:
    unique even where a database starts over) and shared, through ``memory``, by every workload
    whose options are first asked for before the next pass; so those options are all planned on
    the cluster as that one read found it, at the time it was read.

    Read afresh (and shared from then on) when ``workload`` is not in the shared snapshot's queue as
    it is in the database (submitted or requeued since that read, held or released, moved)."""
    from scheduling.snapshot import UNALLOCATED

    cluster = workload.cluster
    key = (cluster.pk, cluster.created_at, *latest_pass)
    shared = memory.snapshots.get(cluster.pk)
    if shared is not None and shared.key == key:
        queued = next((w for w in shared.snapshot.pending if w.id == workload.pk), None)
        path = workload.allocation.path if workload.allocation is not None else UNALLOCATED
        if queued is not None and queued.held == workload.held and queued.allocation == path:
            return shared
    snapshot, config = options_snapshot(cluster=cluster, now=now, memory=memory.pending)
    shared = memory.snapshots[cluster.pk] = PassSnapshot(key, snapshot, config, now)
    return shared
