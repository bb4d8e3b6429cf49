"""The vocabulary of DESIGN 2, in one place: the glossary page, inline help and the API read it.

Ai2 found that old words ("priority") kept living in interfaces with changed meanings. Every page
explains a term through :func:`term` (or the ``{% term %}`` tag), so the words stay the same.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Term:
    slug: str
    word: str
    meaning: str


TERMS: tuple[Term, ...] = (
    Term(
        "cluster",
        "cluster",
        "One pool of GPU nodes scheduled as a unit, behind one backend (simulated, Slurm, Kubernetes).",
    ),
    Term(
        "node",
        "node",
        "A machine with N GPUs of one GPU type, in a topology domain (rack, NVLink or InfiniBand island).",
    ),
    Term(
        "budget-tree",
        "budget tree",
        "The hierarchy of budget nodes (org > program > team > project); one tree, with budgets per cluster.",
    ),
    Term(
        "allocation",
        "allocation",
        "A budget node's budget on one cluster, in GPUs (GPU-hours per hour of wall time).",
    ),
    Term(
        "entitlement",
        "entitlement",
        "An allocation's fraction of its parent, times the parent's entitlement; the root is entitled to the cluster's available GPUs.",
    ),
    Term(
        "usage",
        "usage",
        "GPU-seconds charged to a node's subtree inside the sliding window (running work counts as it runs).",
    ),
    Term(
        "fair-share-ratio",
        "fair-share ratio",
        "Usage share / budget share among siblings: below 1 the allocation is under-served and goes first; above 1 it is over-served.",
    ),
    Term(
        "funded",
        "funded / unfunded",
        "A workload charged to an allocation with budget > 0 is funded; otherwise it is unfunded (opportunistic): it runs on idle capacity and is never protected.",
    ),
    Term(
        "minimum-runtime",
        "minimum runtime",
        "Declared by the workload: the least time it needs to make real progress. Funded work is protected from preemption that long (capped by the cluster).",
    ),
    Term(
        "protected-until",
        "protected until",
        "Start time + min(minimum runtime, cap). Unfunded work is never protected.",
    ),
    Term(
        "resumable",
        "resumable",
        "The workload can be preempted and requeued without losing more than its last checkpoint.",
    ),
    Term(
        "owed",
        "owed",
        "GPU-hours an allocation was entitled to and wanted: the integral of min(entitlement, demand).",
    ),
    Term("delivered", "delivered", "GPU-hours actually run by an allocation's funded workloads."),
    Term(
        "pending-reason",
        "pending reason",
        'A structured, plain-language answer to "why is this not running": a code, its parameters and one sentence.',
    ),
    Term(
        "metrics-pyramid",
        "metrics pyramid",
        "Availability > occupancy > impact > utilization: each level only matters once the one below it is healthy.",
    ),
    Term("availability", "availability", "Healthy GPU-hours / installed GPU-hours."),
    Term(
        "occupancy",
        "occupancy",
        "GPU-hours assigned to any workload / healthy GPU-hours, split into allocated (funded) and unallocated (unfunded).",
    ),
    Term(
        "impact",
        "impact",
        "Delivered / owed GPU-hours, overall and per allocation, and how many allocations reach 95% or more.",
    ),
    Term(
        "utilization",
        "utilization",
        "Mean GPU busy % of running workloads, from telemetry; idle-but-held workloads (squatting) show up here.",
    ),
    Term("wait", "wait", "Submit to first start, or requeue to restart, for each run of a workload."),
    Term(
        "preemption",
        "preemption",
        "The scheduler stops running work past its protected-until time to serve an under-served allocation; resumable work is requeued.",
    ),
)

_BY_SLUG = {term.slug: term for term in TERMS}


def term(slug: str) -> Term:
    """The term named ``slug``; a typo fails loudly so a page never shows an unexplained word."""
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise KeyError(f"No glossary term {slug!r}; add it to portal.glossary.TERMS") from None
