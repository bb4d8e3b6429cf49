"""``python -m benchmarks.outcomes``: every trace of a folder under every policy, one JSON line each."""

from __future__ import annotations

import json
from io import StringIO

import pytest

from benchmarks import outcomes
from scheduling.simulator import POLICIES

TRACE = """submit_time,allocation,user,gpus,gpus_per_node,duration_s,class,resumable,min_runtime_s,max_runtime_s
0,lab/a,alice,8,8,3600,batch,false,900,
60,lab/b,bob,8,8,3600,batch,true,900,7200
120,lab/a,alice,1,1,600,debug,false,150,
600,lab/b,bob,16,8,1800,batch,false,450,
"""


@pytest.fixture
def traces(tmp_path):
    (tmp_path / "tiny.csv").write_text(TRACE, encoding="utf-8")
    (tmp_path / "tiny-budgets.csv").write_text("allocation,gpus\nlab/a,6.8\nlab/b,6.8\n", encoding="utf-8")
    (tmp_path / "tiny-cluster.json").write_text('{"nodes": 2, "gpus_per_node": 8}', encoding="utf-8")
    (tmp_path / "fidelity").mkdir()
    (tmp_path / "fidelity" / "other.csv").write_text(TRACE, encoding="utf-8")
    return tmp_path


def test_every_trace_runs_under_every_policy_one_json_line_each(traces):
    out, err = StringIO(), StringIO()

    code = outcomes.main(["--json", "--traces", str(traces), "--only", "tiny"], out, err)

    lines = [json.loads(text) for text in out.getvalue().splitlines()]
    assert code == 0
    assert [(line["trace"], line["policy"]) for line in lines] == [("tiny", name) for name in POLICIES]
    for line in lines:
        assert line["jobs"] == 4
        assert set(line["lost_gpu_hours_by_cause"]) == {"preemption", "node_failure"}
        assert set(line["by_size"]) == {"1", "2-7", "8-63", "64+"}
        assert line["wall_s"] >= 0
    assert "[1/" in err.getvalue()  # progress on stderr


def test_the_folder_lists_its_traces_and_the_ai2_month_but_not_fidelity(traces):
    assert [case.name for case in outcomes.find_cases(traces)] == ["tiny", "ai2"]


def test_a_missing_traces_folder_is_a_clear_error(tmp_path):
    err = StringIO()

    code = outcomes.main(["--traces", str(tmp_path / "nowhere")], StringIO(), err)

    assert code == 2
    assert f"no traces folder at {tmp_path / 'nowhere'}: pass --traces DIR" in err.getvalue()


def test_an_unknown_trace_name_lists_the_known_ones(traces):
    err = StringIO()

    code = outcomes.main(["--traces", str(traces), "--only", "tinny"], StringIO(), err)

    assert code == 2
    assert "unknown trace tinny; choose from tiny, ai2" in err.getvalue()


def test_days_caps_the_replay_and_policy_picks_one(traces):
    out = StringIO()

    outcomes.main(
        ["--traces", str(traces), "--only", "tiny", "--policy", "fifo", "--days", "0.005"], out, StringIO()
    )

    (line,) = [json.loads(text) for text in out.getvalue().splitlines()]
    assert (line["policy"], line["days"], line["jobs"]) == (
        "fifo",
        0.005,
        3,
    )  # 432 s: the 16-GPU job is later


def test_the_widest_band_needs_twenty_jobs():
    by_size = {"1": {"jobs": 500}, "2-7": {"jobs": 20}, "8-63": {"jobs": 19}, "64+": {"jobs": 0}}

    assert outcomes.widest_band(by_size) == "2-7"
    assert outcomes.widest_band({"1": {"jobs": 3}}) is None


def test_the_markdown_table_has_one_row_per_trace_and_policy(traces, tmp_path):
    out = StringIO()
    outcomes.main(["--traces", str(traces), "--only", "tiny", "--policy", "fifo"], out, StringIO())
    saved = tmp_path / "run.jsonl"
    saved.write_text(out.getvalue(), encoding="utf-8")
    table = StringIO()

    outcomes.main(["--from", str(saved)], table, StringIO())

    runs, against, verdicts = table.getvalue().split("\n\n")
    head, rule, *rows = runs.splitlines()
    assert head.startswith("| trace | policy | delivered / owed |")
    assert rows == [rows[0]] and rows[0].startswith("| tiny | fifo | ")
    assert head.count("|") == rule.count("|") == rows[0].count("|")
    assert len(against.splitlines()) == 2  # no fairshare run: the comparison has no rows
    # nor is any target met or missed anywhere
    assert all(row.endswith("| - | - |") for row in verdicts.splitlines()[2:])


def _line(policy, **numbers):
    line = {"trace": "t", "policy": policy, "widest_band": "64+", **numbers}
    return {"lost_preemption_share": 0.0, "occupancy_when_contended": 0.9, **line}


def test_fair_share_is_held_against_the_best_baseline_on_each_measure():
    lines = [
        _line("fairshare", jobs_completed=90, funded_jobs_completed=70, goodput_gpu_hours=50.0,
              widest_band_funded_wait_p90_s=300.0,
              delivered_owed_ratio=1.0, min_team_delivered_owed_ratio=0.5, lost_preemption_share=0.123,
              funded_debug_interactive_wait_p90_s=12.0),
        _line("fifo", jobs_completed=100, funded_jobs_completed=60, goodput_gpu_hours=40.0,
              widest_band_funded_wait_p90_s=50.0),
        _line("easy", jobs_completed=95, funded_jobs_completed=64, goodput_gpu_hours=80.0,
              widest_band_funded_wait_p90_s=100.0),
    ]  # fmt: skip

    (row,) = outcomes.against_baselines(lines).splitlines()[2:]

    # fewer jobs than fifo, more funded jobs than easy, the best at funded work
    assert (
        row
        == "| t | 1.00 | 0.50 | 12 | 0.90 (fifo) | 1.09 (easy) | 0.62 (easy) | 12.3% | 3.00 (64+) | 0.900 |"
    )


def test_the_lowest_team_comes_with_what_it_was_owed():
    summary = {
        "per_team": [
            {"allocation": "lab/a", "owed_gpu_hours": 1200.0, "delivered_owed_ratio": 1.02},
            {"allocation": "lab/b", "owed_gpu_hours": 2.58, "delivered_owed_ratio": 0.32},
        ]
    }
    line = outcomes.outcome("t", "fairshare", summary, 1.0)
    assert (line["min_team_delivered_owed_ratio"], line["min_team_owed_gpu_hours"]) == (0.32, 2.58)

    lines = [{**_line("fairshare"), **line}, _line("fifo")]
    (row,) = outcomes.against_baselines(lines).splitlines()[2:]
    assert row.split(" | ")[2] == "0.32 (owed 2.6 GPU-h)"


def test_each_target_names_the_inputs_that_meet_it_and_what_the_others_measured():
    lines = [
        _line("fairshare", delivered_owed_ratio=0.9923, min_team_delivered_owed_ratio=0.35,
              funded_debug_interactive_wait_p90_s=1562.0, jobs_completed=97, goodput_gpu_hours=96.0,
              lost_preemption_share=0.0005, widest_band_funded_wait_p90_s=201.0,
              occupancy_when_contended=0.97),
        _line("easy", jobs_completed=100, goodput_gpu_hours=100.0, widest_band_funded_wait_p90_s=100.0),
        {**_line("fairshare", delivered_owed_ratio=0.9899, min_team_delivered_owed_ratio=0.95,
                 funded_debug_interactive_wait_p90_s=30.0, jobs_completed=1, goodput_gpu_hours=1.0,
                 lost_preemption_share=0.0101, occupancy_when_contended=0.969), "trace": "u"},
    ]  # fmt: skip

    rows = [row.split(" | ") for row in outcomes.verdicts(lines).splitlines()[2:]]

    assert [(met, missed) for _, met, missed in rows] == [
        ("t", "u (0.9899) |"),  # 0.9899 is under 0.99, though both show as 0.99 in the table above
        ("u", "t (0.35) |"),
        ("u", "t (1,562 s) |"),
        ("t", "- |"),  # 0.97 of easy's jobs is enough; u has no baseline to compare with
        ("-", "t (0.96) |"),
        ("t", "u (1.01%) |"),
        ("-", "t (2.01) |"),
        ("t", "u (0.969) |"),
    ]
