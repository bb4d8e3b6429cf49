"""The Ai2-like generator, determinism of whole runs, and ``manage.py simulate``."""

from __future__ import annotations

import json
from collections import Counter
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduling.simulator import run_simulation
from scheduling.simulator.scenario import UNFUNDED, Ai2Parameters, ai2_scenario

SMALL = Ai2Parameters(days=0.5, nodes=12, teams=3, researchers=12, warmup_days=0.25, node_mtbf_days=5.0)
REQUIRED_KEYS = {
    "policy", "days", "jobs", "gpus", "delivered_owed_ratio", "teams", "teams_at_95pct", "jain_index",
    "availability", "occupancy", "unallocated_share", "wait_p50_s", "wait_p90_s", "by_class",
    "preemptions", "lost_gpu_hours", "sim_wall_s",
}  # fmt: skip


def test_the_default_lab_has_15_teams_funded_with_82_percent_of_1000_gpus():
    inputs = ai2_scenario(Ai2Parameters(days=1.0))

    teams = [spec for spec in inputs.tree if spec.path.count("/") == 2]
    assert (inputs.gpus, len(inputs.cluster_nodes), len(teams)) == (1000, 125, 15)
    assert sum(team.budget for team in teams) == pytest.approx(820, abs=8)
    assert len({job.user for job in inputs.jobs if job.allocation != UNFUNDED}) <= 150


def test_the_lab_mixes_every_kind_of_work_and_everyone_claims_high_priority():
    jobs = ai2_scenario(Ai2Parameters(days=2.0)).jobs

    kinds = Counter(job.kind for job in jobs)
    assert set(kinds) == {"debug", "interactive", "sweep", "batch", "unfunded"}
    assert all(job.gpus <= 2 and job.duration_s <= 45 * 60 for job in jobs if job.kind == "debug")
    assert all(job.gpus in (8, 16, 32, 64) and job.resumable for job in jobs if job.kind == "batch")
    assert all(job.busy <= 0.5 for job in jobs if job.kind == "interactive")
    assert Counter(job.priority for job in jobs).most_common(1)[0][0] == 3


def test_the_same_seed_gives_the_same_lab_and_another_seed_another():
    assert ai2_scenario(SMALL) == ai2_scenario(SMALL)
    assert ai2_scenario(SMALL).jobs != ai2_scenario(Ai2Parameters(**{**SMALL.__dict__, "seed": 2})).jobs


@pytest.mark.parametrize("policy", ["fairshare", "priority", "fifo"])
def test_the_same_inputs_and_seed_give_byte_identical_json(policy):
    first = run_simulation(ai2_scenario(SMALL), policy=policy).to_json(wall_clock=False)
    second = run_simulation(ai2_scenario(SMALL), policy=policy).to_json(wall_clock=False)

    assert first == second
    assert json.loads(first)["jobs"] > 20


def test_the_command_writes_json_and_a_self_contained_html_report(tmp_path):
    out = StringIO()
    json_path, html_path = tmp_path / "run.json", tmp_path / "run.html"

    call_command(
        "simulate", "--scenario", "ai2", "--days", "0.25", "--nodes", "12", "--teams", "3",
        "--researchers", "12", "--warmup-days", "0.1", "--policy", "fairshare,priority",
        "--json", str(json_path), "--html", str(html_path), "--no-progress", stdout=out,
    )  # fmt: skip

    runs = json.loads(json_path.read_text())
    assert [run["policy"] for run in runs] == ["fairshare", "priority"]
    assert all(set(run) >= REQUIRED_KEYS for run in runs)
    page = html_path.read_text()
    assert "plotly.js" in page[:500]  # the library is inline: the report opens offline
    assert "GPU-hours per team" in page and "Occupancy over time" in page and "Wait from submit" in page
    assert "per size band" in page and "goodput GPU-hours" in page
    assert "delivered_owed_ratio" in out.getvalue() and "goodput_gpu_hours" in out.getvalue()


@pytest.mark.parametrize(
    ("flags", "delay"), [((), 300.0), (("--resubmit-delay-s", "60"), 60.0), (("--no-resubmit",), None)]
)
def test_the_command_resubmits_ended_work_after_a_delay_or_not_at_all(flags, delay):
    out = StringIO()

    call_command(
        "simulate", "--scenario", "ai2", "--days", "0.1", "--nodes", "8", "--teams", "2",
        "--researchers", "6", "--warmup-days", "0.05", "--json", "-", "--no-progress", *flags, stdout=out,
    )  # fmt: skip

    assert json.loads(out.getvalue())["resubmit_delay_s"] == delay


def test_the_command_replays_a_trace_and_reports_its_bad_rows(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("submit_time,allocation,user,gpus,duration_s\n0,a,u,1,60\n10,a,u,lots,60\n")

    with pytest.raises(CommandError, match=r"t.csv:3: gpus must be a number, got 'lots'"):
        call_command("simulate", "--trace", str(trace), "--nodes", "1", "--no-progress", stdout=StringIO())

    out = StringIO()
    call_command(
        "simulate", "--trace", str(trace), "--nodes", "1", "--skip-bad-rows", "--json", "-",
        "--no-progress", stdout=out, stderr=StringIO(),
    )  # fmt: skip
    assert json.loads(out.getvalue())["jobs"] == 1
