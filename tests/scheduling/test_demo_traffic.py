"""The demo's traffic generator and the beat task that queues passes."""

from __future__ import annotations

import random
from datetime import timedelta

from django.core.management import call_command

from scheduling.models import Workload
from scheduling.passes import passes_due, run_pass
from scheduling.traffic import MIX, arrivals_per_second, workload_spec
from tests.scheduling.conftest import T0


def test_demo_traffic_submits_a_mixed_stream_to_the_members_allocations(lab):
    call_command(
        "demo_traffic", "--ticks", "2", "--tick-s", "0.01", "--seed", "3", "--burst", "30", stdout=None
    )
    workloads = list(Workload.objects.all())
    assert len(workloads) >= 30
    assert {w.workload_class for w in workloads} == set(MIX)
    member_paths = {"lab/vision", "lab/vision/perception", "lab/language", "lab/sandbox"}
    assert {w.allocation.path for w in workloads} <= member_paths
    assert all(w.gpus <= 8 or w.gpus % 8 == 0 for w in workloads)
    assert all(w.metadata["duration_s"] > 0 for w in workloads)


def test_the_traffic_speed_shortens_durations_and_raises_the_arrival_rate():
    slow = workload_spec(random.Random(1), speed=1.0, node_size=8)
    fast = workload_spec(random.Random(1), speed=60.0, node_size=8)
    assert fast.duration_s == slow.duration_s / 60
    assert arrivals_per_second(capacity_gpus=1000, demand=2.5, speed=60) == 60 * arrivals_per_second(
        capacity_gpus=1000, demand=2.5, speed=1
    )


def test_beat_queues_a_pass_only_for_clusters_whose_interval_has_elapsed(lab):
    assert passes_due(now=T0) == [(lab.main.pk, 10)]
    run_pass(cluster_id=lab.main.pk, now=T0)
    assert passes_due(now=T0 + timedelta(seconds=5)) == []
    assert passes_due(now=T0 + timedelta(seconds=8)) == [(lab.main.pk, 10)]  # a late start still counts
