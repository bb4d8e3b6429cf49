"""The easy baseline replayed by the engine, and the fidelity report's statistics (issue 17, point 5)."""

import json

import pytest

from benchmarks.fidelity import agrees, average_ranks, replay, spearman, within_factor
from scheduling.simulator import policy_config, run_simulation
from scheduling.simulator.engine import Engine
from scheduling.simulator.model import SimJob, SimulationInput
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario
from scheduling.simulator.traces import budget_tree, cluster_nodes

SMALL = Ai2Parameters(days=0.5, nodes=12, teams=3, researchers=12, warmup_days=0.25, node_mtbf_days=5.0)

# Four 1-GPU nodes. A runs; B (all four) reserves for t = 1000, when A declares it ends; C ends
# by then and backfills; D would end too late and E declares no runtime: both wait for B.
JOBS = (
    SimJob(1, "lab/a", "ann", 1, submit_s=0, duration_s=1000, max_runtime_s=1000, ref="A"),
    SimJob(2, "lab/a", "bob", 4, submit_s=10, duration_s=100, max_runtime_s=100, ref="B"),
    SimJob(3, "lab/a", "cat", 1, submit_s=20, duration_s=500, max_runtime_s=600, ref="C"),
    SimJob(4, "lab/a", "dan", 1, submit_s=30, duration_s=100, max_runtime_s=2000, ref="D"),
    SimJob(5, "lab/a", "eve", 1, submit_s=40, duration_s=100, ref="E"),
)


def first_starts(policy: str) -> dict[str, float | None]:
    inputs = SimulationInput(
        name="easy-by-hand",
        cluster_nodes=cluster_nodes(4, 1),
        tree=budget_tree({"lab/a": 4.0}, ["lab/a"]),
        jobs=JOBS,
        days=1.0,
    )
    engine = Engine(inputs, policy_config(policy), None, pass_interval_s=10.0)
    engine.run()
    return {state.spec.ref: state.first_start for state in engine.jobs.values()}


def test_easy_reserves_for_the_head_and_backfills_only_work_that_ends_in_time():
    assert first_starts("easy") == {"A": 0, "B": 1000, "C": 20, "D": 1100, "E": 1100}


def test_fifo_has_no_reservation_so_everything_that_fits_starts_at_once():
    assert first_starts("fifo") == {"A": 0, "B": 1000, "C": 20, "D": 30, "E": 40}


def test_slurm_backfills_like_easy_here():
    """One allocation, so Fair Tree orders as submitted: the same starts as easy."""
    assert first_starts("slurm") == first_starts("easy")


def test_spearman_of_known_rankings():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    # one swapped pair: 1 - 6 * (1 + 1) / (4 * (16 - 1)) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # ties share their mean rank: ranks (1.5, 1.5, 3, 4) against (1, 2, 3, 4): 4.5 / sqrt(4.5 * 5)
    assert average_ranks([0, 0, 10, 20]) == [1.5, 1.5, 3, 4]
    assert spearman([0, 0, 10, 20], [1, 2, 3, 4]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert spearman([5, 5, 5], [1, 2, 3]) is None  # a constant side has no ranking


def test_within_2x_raises_both_waits_to_a_minute_first():
    assert agrees(0, 59) and agrees(0, 0)  # both under a minute
    assert agrees(0, 119) and not agrees(0, 121)  # 0 counts as 60 s
    assert agrees(500, 1000) and not agrees(500, 1001)
    simulated = [0, 30, 100, 500, 1000]
    recorded = [50, 0, 250, 300, 3000]  # agree, agree, 250 > 2 x 100, 500 <= 2 x 300, 3000 > 2000
    assert within_factor(simulated, recorded) == pytest.approx(3 / 5)


def test_the_fidelity_replay_matches_jobs_by_id_and_compares_their_waits(tmp_path):
    header = "id,submit_time,allocation,user,gpus,gpus_per_node,duration_s,max_runtime_s,recorded_wait_s"
    rows = [
        "7,0,g/a,ann,1,1,1000,1000,0",
        "8,10,g/a,bob,4,1,100,100,990",  # simulated: 990 (it starts at 1000)
        "9,20,g/a,cat,1,1,500,600,4000",  # simulated: 0 (it backfills at 20), recorded far more
    ]
    trace = tmp_path / "tiny.csv"
    trace.write_text("\n".join([header, *rows]) + "\n")
    (tmp_path / "tiny-cluster.json").write_text(json.dumps({"nodes": 4, "gpus_per_node": 1}))
    row = replay(trace, "easy")
    assert row["never_started"] == 0
    everything = row["all"]
    assert everything["simulated"]["mean_s"] == round(990 / 3)
    assert everything["recorded"]["mean_s"] == round(4990 / 3)
    assert everything["within_2x"] == pytest.approx(round(2 / 3, 3))
    # ranks (1.5, 3, 1.5) against (1, 2, 3): deviations (-0.5, 1, -0.5) and (-1, 0, 1), covariance 0
    assert everything["spearman"] == pytest.approx(0.0)
    assert row["wide"]["jobs"] == 0


@pytest.mark.parametrize("policy", ["easy", "slurm"])
def test_the_baselines_replay_a_lab_byte_identically_and_never_preempt(policy):
    first = run_simulation(ai2_scenario(SMALL), policy=policy)
    second = run_simulation(ai2_scenario(SMALL), policy=policy)
    assert first.to_json(wall_clock=False) == second.to_json(wall_clock=False)
    assert first.summary["jobs"] > 20
    assert first.summary["preemptions"] == 0
