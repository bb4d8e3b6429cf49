"""An Ai2-like stream of workloads for the demo: many small debug jobs, some interactive sessions,
and the GPU-hours in large, long, mostly resumable batch jobs (DESIGN 1: demand 2-3x capacity).

Durations are real-world seconds divided by ``speed``, so ``speed=60`` plays an hour in a minute;
the declared minimum and maximum runtimes are scaled the same way to keep the contract coherent.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# class -> (share of submissions, GPU choices, duration range in hours, min runtime range in hours, resumable share)
MIX = {
    "debug": (0.35, (1, 1, 2, 4), (0.05, 0.5), (0.0, 0.0), 0.0),
    "interactive": (0.2, (1, 2, 4, 8), (0.5, 4.0), (0.25, 1.0), 0.1),
    "batch": (0.45, (8, 8, 16, 16, 32, 64), (2.0, 36.0), (1.0, 4.0), 0.85),
}
FAILURE_SHARE = 0.04


@dataclass(frozen=True)
class WorkloadSpec:
    workload_class: str
    gpus: int
    duration_s: float
    min_runtime_s: int
    max_runtime_s: int
    resumable: bool
    fail_after_s: float | None
    utilisation: float


def mean_gpu_hours() -> float:
    """Expected GPU-hours of one submission (real time), for the arrival rate."""
    total = 0.0
    for share, gpus, (low, high), _, _ in MIX.values():
        total += share * (sum(gpus) / len(gpus)) * (low + high) / 2
    return total


def mean_gpus() -> float:
    return sum(share * sum(gpus) / len(gpus) for share, gpus, *_ in MIX.values())


def opening_burst(*, capacity_gpus: int) -> int:
    """Submissions at start that ask for about 1.5x the cluster, so pages are busy within a minute."""
    return max(1, round(capacity_gpus * 1.5 / mean_gpus()))


def arrivals_per_second(*, capacity_gpus: int, demand: float, speed: float) -> float:
    """Submissions per wall-clock second so that demand x capacity GPU-hours arrive per (scaled) hour."""
    return capacity_gpus * demand / mean_gpu_hours() / 3600.0 * speed


def workload_spec(
    rng: random.Random, *, speed: float, node_size: int, cluster_gpus: int = 10**6
) -> WorkloadSpec:
    workload_class = rng.choices(list(MIX), weights=[mix[0] for mix in MIX.values()])[0]
    _, gpu_choices, (low, high), (min_low, min_high), resumable_share = MIX[workload_class]
    fits = [g for g in gpu_choices if (g <= node_size or g % node_size == 0) and g <= cluster_gpus]
    gpus = rng.choice(fits or [1])
    hours = rng.uniform(low, high)
    duration = hours * 3600.0 / speed
    fails = rng.random() < FAILURE_SHARE
    squatting = workload_class == "interactive" and rng.random() < 0.3
    return WorkloadSpec(
        workload_class=workload_class, gpus=gpus, duration_s=duration,
        min_runtime_s=int(rng.uniform(min_low, min_high) * 3600.0 / speed),
        max_runtime_s=max(1, int(duration * rng.uniform(1.1, 1.5))), resumable=rng.random() < resumable_share,
        fail_after_s=duration * rng.uniform(0.05, 0.9) if fails else None,
        utilisation=rng.uniform(2.0, 12.0) if squatting else rng.uniform(55.0, 98.0),
    )  # fmt: skip
