"""Submit an Ai2-like stream of workloads to the simulated clusters until stopped (Ctrl-C).

manage.py demo_traffic --speed 60          # an hour of traffic per minute
manage.py demo_traffic --ticks 5           # five one-second ticks, then stop (tests)
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db.models import Sum

from budgets.models import Membership, Role
from scheduling.backends.simulated import simulated_node_set_health
from scheduling.models import BackendKind, Cluster, Node, SimulatedNode, Workload, WorkloadState
from scheduling.services import SubmissionRefused, workload_submit
from scheduling.traffic import arrivals_per_second, opening_burst, workload_spec


class Command(BaseCommand):
    help = "Submit demo traffic (an Ai2-like workload stream) to the simulated clusters."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--speed", type=float, default=60.0, help="simulated seconds per real second")
        parser.add_argument("--demand", type=float, default=2.5, help="demand as a multiple of capacity")
        parser.add_argument(
            "--cluster", action="append", help="cluster slug (default: every simulated cluster)"
        )
        parser.add_argument(
            "--burst",
            type=int,
            default=None,
            help="submissions per cluster at start (default: 1.5x capacity)",
        )
        parser.add_argument(
            "--max-pending", type=int, default=1500, help="stop submitting past this queue length"
        )
        parser.add_argument(
            "--ticks", type=int, default=0, help="stop after this many ticks (0: run until Ctrl-C)"
        )
        parser.add_argument("--tick-s", type=float, default=1.0)
        parser.add_argument("--seed", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        rng = random.Random(options["seed"])
        clusters = self._clusters(options["cluster"])
        submitters = self._submitters()
        if not clusters or not submitters:
            self.stderr.write(
                "No simulated cluster or no members to submit as: run `manage.py load_demo` first."
            )
            return
        self.stdout.write(
            f"demo traffic: {', '.join(c.slug for c in clusters)} at {options['speed']:g}x (Ctrl-C stops)"
        )
        for cluster in clusters:
            capacity = Node.objects.filter(cluster=cluster).aggregate(total=Sum("gpus"))["total"] or 0
            burst = (
                options["burst"] if options["burst"] is not None else opening_burst(capacity_gpus=capacity)
            )
            self._submit(cluster, rng, submitters, count=burst, speed=options["speed"])
        tick = 0
        try:
            while not options["ticks"] or tick < options["ticks"]:
                tick += 1
                time.sleep(options["tick_s"])
                for cluster in clusters:
                    self._tick(cluster, rng, submitters, options)
        except KeyboardInterrupt:
            self.stdout.write("demo traffic stopped")

    def _clusters(self, slugs: list[str] | None) -> list[Cluster]:
        clusters = Cluster.objects.filter(backend_kind=BackendKind.SIMULATED)
        return list(clusters.filter(slug__in=slugs) if slugs else clusters)

    def _submitters(self) -> list[Membership]:
        memberships = Membership.objects.filter(role__in=[Role.MEMBER, Role.MANAGER], node__archived=False)
        return list(memberships.select_related("user", "node").order_by("id"))

    def _tick(
        self, cluster: Cluster, rng: random.Random, submitters: list[Membership], options: dict
    ) -> None:
        pending = Workload.objects.filter(cluster=cluster, state=WorkloadState.PENDING).count()
        capacity = Node.objects.filter(cluster=cluster).aggregate(total=Sum("gpus"))["total"] or 0
        rate = arrivals_per_second(capacity_gpus=capacity, demand=options["demand"], speed=options["speed"])
        arrivals = _poisson(rng, rate * options["tick_s"])
        if pending < options["max_pending"]:
            self._submit(cluster, rng, submitters, count=arrivals, speed=options["speed"])
        self._flap_a_node(cluster, rng, speed=options["speed"], tick_s=options["tick_s"])

    def _submit(self, cluster: Cluster, rng: random.Random, submitters: list[Membership], *, count: int,
                speed: float) -> None:  # fmt: skip
        sizes = list(Node.objects.filter(cluster=cluster).values_list("gpus", flat=True))
        node_size, cluster_gpus = max(sizes, default=8), sum(sizes) or 8
        for _ in range(count):
            member = rng.choice(submitters)
            spec = workload_spec(rng, speed=speed, node_size=node_size, cluster_gpus=cluster_gpus)
            metadata = {"duration_s": spec.duration_s, "utilisation": spec.utilisation, "source": "demo_traffic",
                        **({"fail_after_s": spec.fail_after_s} if spec.fail_after_s else {})}  # fmt: skip
            try:
                workload_submit(
                    actor=member.user, cluster=cluster, allocation_path=member.node.path, gpus=spec.gpus,
                    workload_class=spec.workload_class, min_runtime_s=spec.min_runtime_s, resumable=spec.resumable,
                    max_runtime_s=spec.max_runtime_s, name=f"{spec.workload_class}-{rng.randrange(10**6):06d}",
                    metadata=metadata,
                )  # fmt: skip
            except SubmissionRefused:
                continue  # e.g. a shape this cluster cannot hold

    def _flap_a_node(self, cluster: Cluster, rng: random.Random, *, speed: float, tick_s: float) -> None:
        """About one node failure per simulated day; a sick node recovers after about an hour."""
        sick = list(
            SimulatedNode.objects.filter(cluster=cluster, healthy=False).values_list("name", flat=True)
        )
        for name in sick:
            if rng.random() < tick_s * speed / 3600.0:
                simulated_node_set_health(cluster=cluster, name=name, healthy=True)
        if rng.random() < tick_s * speed / 86400.0:
            names = list(
                SimulatedNode.objects.filter(cluster=cluster, healthy=True).values_list("name", flat=True)
            )
            if names:
                simulated_node_set_health(cluster=cluster, name=rng.choice(names), healthy=False,
                                          reason="DRAIN: Xid 79, GPU fell off the bus")  # fmt: skip


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method; fine for the small means of one tick."""
    if mean <= 0:
        return 0
    limit, count, product = math.exp(-min(mean, 30.0)), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count
