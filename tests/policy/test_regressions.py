"""Regression: explaining a workload whose preemption failed during the walk, when by the end of
the pass (settle off) its shape fits on GPUs that later preemptions left free, crashed the pass
(``max()`` of no victims in the protection check). Found by a random-snapshot digest run, shrunk."""

from scheduling.policy import (
    BudgetNodeSpec,
    ClusterNodeSpec,
    PendingWorkload,
    PolicyConfig,
    RunningWorkload,
    Snapshot,
    plan,
)

NOW = 1000000.0
NODES = [  # name, GPUs, type, domain
    ("n002", 8, "H100", "y"),
    ("n003", 4, "A100", "z"),
    ("n006", 4, "A100", "x"),
    ("n007", 8, "H100", "x"),
    ("n008", 4, "A100", "x"),
    ("n009", 8, "H100", "x"),
    ("n010", 8, "H100", "z"),
    ("n012", 4, "A100", "z"),
    ("n013", 8, "H100", "x"),
    ("n014", 8, "A100", "z"),
    ("n015", 8, "H100", "y"),
    ("n016", 8, "H100", "x"),
    ("n017", 8, "H100", "x"),
]
RUNNING = [  # id, allocation, user, gpus, placement, started_at, protected_until, resumable, funded, expected_end, submitted_at, priority
    (100000, "org/t0", "bob", 2, (("n003", 2),), 1000000.0, 1000000.0, False, False, None, 999940.0, 1),
    (100001, "org/t0", "alice", 8, (("n000", 8),), 992800.0, 1007200.0, False, True, None, 992740.0, 0),
    (100002, "org/t0/p0", "alice", 1, (("n003", 1),), 892000.0, 906400.0, False, True, 902800.0, 891940.0, 0),
    (100003, "org/t0/p0", "bob", 2, (("n006", 2),), 892000.0, 892000.0, False, True, None, 891940.0, 0),
    (
        100006,
        "org/t0/p0",
        "alice",
        2,
        (("n006", 2),),
        999400.0,
        1042600.0,
        False,
        True,
        1010200.0,
        999340.0,
        1,
    ),
    (
        100007,
        "org/t0",
        "bob",
        16,
        (("n001", 8), ("n011", 8)),
        964000.0,
        1007200.0,
        False,
        True,
        1036000.0,
        963940.0,
        1,
    ),
    (100008, "org/t0/p0", "bob", 1, (("n012", 1),), 999400.0, 1003000.0, True, True, 1071400.0, 999340.0, 2),
    (100010, "org/t0/p0", "bob", 8, (("n002", 8),), 892000.0, 892000.0, False, True, 902800.0, 891940.0, 1),
    (100011, "org/t0", "bob", 8, (("n004", 8),), 999400.0, 1013800.0, False, True, None, 999340.0, 1),
    (
        100012,
        "org/t0/p0",
        "bob",
        16,
        (("n007", 8), ("n009", 8)),
        964000.0,
        964000.0,
        False,
        False,
        974800.0,
        963940.0,
        2,
    ),
    (
        100013,
        "org/t0/p0",
        "alice",
        2,
        (("n012", 2),),
        992800.0,
        992800.0,
        True,
        False,
        1064800.0,
        992740.0,
        1,
    ),
    (100014, "org/t0", "alice", 1, (("n010", 1),), 1000000.0, 1000000.0, False, True, None, 999940.0, 0),
    (
        100015,
        "org/t0",
        "alice",
        16,
        (("n013", 8), ("n016", 8)),
        892000.0,
        935200.0,
        True,
        True,
        902800.0,
        891940.0,
        2,
    ),
]
PENDING = [  # id, allocation, user, gpus, submitted_at, gpus_per_node, gpu_type, workload_class, min_runtime_s, resumable, max_runtime_s, priority, held_by
    (54, "org/t0", "bob", 2, 995239.0, 2, None, "debug", 36000.0, True, 1800.0, 1, "ops"),
    (313, "org/t0", "alice", 3, 995294.0, None, "A100", "debug", 36000.0, False, None, 2, "ops"),
    (181, "org/t0", "alice", 1, 995332.5, 4, "A100", "debug", 0.0, False, None, 1, "ops"),
    (289, "org/t0", "alice", 8, 995389.5, None, None, "batch", 36000.0, True, 18000.0, 2, ""),
    (103, "org/t0", "bob", 4, 995513.5, None, None, "batch", 36000.0, False, 18000.0, 0, ""),
    (127, "org/t0", "bob", 16, 995592.5, 8, None, "batch", 36000.0, True, 1800.0, 1, ""),
    (82, "org/t0", "bob", 1, 995634.0, None, "A100", "batch", 3600.0, True, 1800.0, 2, "ops"),
    (23, "org/t0", "bob", 8, 995655.5, 4, None, "debug", 0.0, False, 1800.0, 2, ""),
    (47, "org/t0", "bob", 1, 995717.5, None, "A100", "debug", 3600.0, True, 18000.0, 1, ""),
    (258, "org/t0", "bob", 4, 995782.5, None, None, "debug", 36000.0, False, 180000.0, 0, ""),
    (389, "org/t0", "alice", 8, 995818.0, 4, None, "debug", 3600.0, False, 180000.0, 0, "ops"),
    (68, "org/t0", "alice", 2, 995866.0, 2, None, "batch", 3600.0, False, None, 2, ""),
    (101, "org/t0", "bob", 2, 996059.0, 2, "A100", "batch", 0.0, True, None, 1, "ops"),
    (286, "org/t0", "bob", 1, 996270.5, 4, None, "debug", 3600.0, False, 18000.0, 2, "ops"),
    (155, "org/t0", "bob", 1, 996387.0, 4, None, "batch", 3600.0, True, 18000.0, 2, "ops"),
    (66, "org/t0", "alice", 8, 996423.0, None, "H100", "batch", 36000.0, True, None, 2, ""),
    (294, "org/t0", "alice", 4, 996542.5, 2, None, "debug", 3600.0, False, None, 2, ""),
]
SNAPSHOT = Snapshot(
    "d",
    (
        BudgetNodeSpec(path="org/t0", parent="org", budget=5.0, concurrency_limit=None),
        BudgetNodeSpec(path="org/t0/p0", parent="org/t0", budget=10.0, concurrency_limit=4),
    ),
    tuple(ClusterNodeSpec(*row) for row in NODES),
    tuple(
        RunningWorkload(
            **dict(
                zip(
                    (
                        "id",
                        "allocation",
                        "user",
                        "gpus",
                        "placement",
                        "started_at",
                        "protected_until",
                        "resumable",
                        "funded",
                        "expected_end",
                        "submitted_at",
                        "priority",
                    ),
                    row,
                    strict=True,
                )
            )
        )
        for row in RUNNING
    ),
    tuple(
        PendingWorkload(
            **dict(
                zip(
                    (
                        "id",
                        "allocation",
                        "user",
                        "gpus",
                        "submitted_at",
                        "gpus_per_node",
                        "gpu_type",
                        "workload_class",
                        "min_runtime_s",
                        "resumable",
                        "max_runtime_s",
                        "priority",
                        "held_by",
                    ),
                    row,
                    strict=True,
                )
            )
        )
        for row in PENDING
    ),
    {"org/t0": 1000.0, "org/t0/p0": 10000000.0},
    {
        ("org/t0", "alice"): 1000000.0,
        ("org/t0", "bob"): 1000000.0,
        ("org/t0/p0", "alice"): 1000.0,
        ("org/t0/p0", "bob"): 1000000.0,
    },
)
CONFIG = PolicyConfig(projected_charge_s=360000.0, settle=False)


def test_every_pending_workload_is_explained_when_free_gpus_remain_after_late_preemptions():
    result = plan(SNAPSHOT, NOW, CONFIG)
    started = {start.workload_id for start in result.starts}
    explained = {reason.workload_id for reason in result.reasons}
    assert explained == {w.id for w in SNAPSHOT.pending} - started
    assert all(reason.message for reason in result.reasons)
