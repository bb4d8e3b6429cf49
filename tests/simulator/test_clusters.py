"""Heterogeneous clusters, the adjustments made to trace rows, class-derived priorities, and
``python -m scheduling.simulator`` without Django."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from scheduling.policy import Plan, plan
from scheduling.simulator import run_simulation
from scheduling.simulator.cluster import (
    ClusterFileError,
    Fit,
    NodeGroup,
    fit_job,
    group_nodes,
    read_cluster_file,
)
from scheduling.simulator.traces import TraceError, TraceFormat, read_trace, trace_input

ROOT = Path(__file__).resolve().parents[2]
TWO_TYPES = (NodeGroup(2, 8, "a100"), NodeGroup(2, 4, "v100"))


def _write(tmp_path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_both_cluster_file_forms_are_read_and_nodes_keep_their_group_type_and_size(tmp_path):
    old = _write(tmp_path, "old.json", '{"nodes": 3, "gpus_per_node": 8}')
    new = _write(
        tmp_path,
        "new.json",
        '{"groups": [{"nodes": 2, "gpus_per_node": 8, "gpu_type": "a100"},'
        ' {"nodes": 3, "gpus_per_node": 4, "gpu_type": "v100", "nodes_per_domain": 2}]}',
    )

    assert read_cluster_file(old) == (NodeGroup(3, 8, "GPU"),)
    nodes = group_nodes(read_cluster_file(new))
    assert [(n.name, n.gpus, n.gpu_type, n.domain) for n in nodes] == [
        ("node-0000", 8, "a100", "domain-00"),
        ("node-0001", 8, "a100", "domain-00"),
        ("node-0002", 4, "v100", "domain-01"),
        ("node-0003", 4, "v100", "domain-01"),
        ("node-0004", 4, "v100", "domain-02"),
    ]


def test_a_bad_cluster_file_names_the_group_and_the_key(tmp_path):
    path = _write(
        tmp_path, "c.json", '{"groups": [{"nodes": 2, "gpus_per_node": 8}, {"nodes": 2, "gpus": 4}]}'
    )

    with pytest.raises(ClusterFileError, match=r"c.json: groups\[1\]: unknown key\(s\) gpus"):
        read_cluster_file(path)


def test_each_job_runs_only_on_nodes_of_its_gpu_type(tmp_path):
    """Two a100 nodes of 8 and two v100 nodes of 4. Three 4-GPU v100 jobs (100 s) and an 8-GPU
    a100 job arrive at t=0: the third v100 job waits for a v100 node (t=100) although the a100
    nodes have 8 GPUs free, and an untyped 12-GPU job fills three nodes of one size."""
    path = _write(
        tmp_path,
        "typed.csv",
        "submit_time,allocation,user,gpus,gpu_type,duration_s\n"
        "0,lab,u,4,V100,100\n0,lab,u,4,v100,100\n0,lab,u,4,v100,100\n0,lab,u,8,A100,100\n",
    )
    trace = read_trace(path, TraceFormat(groups=TWO_TYPES))
    inputs = trace_input(trace, budgets={"lab": 24.0}, nodes=group_nodes(TWO_TYPES))
    types = {node.name: node.gpu_type for node in inputs.cluster_nodes}
    starts: dict[int, tuple[float, set[str]]] = {}

    def recording(snapshot, now, config) -> Plan:
        result = plan(snapshot, now, config, explain=False)
        for start in result.starts:
            starts.setdefault(start.workload_id, (now, {types[name] for name, _ in start.placement}))
        return result

    run_simulation(inputs, policy="fifo", planner=recording)

    assert [job.gpu_type for job in trace.jobs] == ["v100", "v100", "v100", "a100"]  # the cluster's spelling
    assert {job_id: kinds for job_id, (_, kinds) in starts.items()} == {
        1: {"v100"},
        2: {"v100"},
        3: {"v100"},
        4: {"a100"},
    }
    assert starts[3][0] >= 100.0 > starts[1][0]


def test_every_kind_of_adjustment_is_counted_and_warned_about_once(tmp_path):
    groups = (NodeGroup(2, 8, "a100"), NodeGroup(3, 4, "v100"))
    path = _write(
        tmp_path,
        "t.csv",
        "submit_time,allocation,user,gpus,gpus_per_node,gpu_type,duration_s\n"
        "0,a,u,0,,,60\n"  # no GPUs: skipped
        "1,a,u,0,,,60\n"  # again: counted, still one warning
        "2,a,u,0.5,,,60\n"  # half a GPU: 1
        "3,a,u,12,,a100,60\n"  # 12 on 8-GPU a100 nodes: 16
        "4,a,u,12,,,60\n"  # untyped 12: three 4-GPU v100 nodes, as written
        "5,a,u,4,,tpu,60\n"  # no such type: skipped
        "6,a,u,100,,,60\n"  # more than the cluster: skipped
        "7,a,u,16,16,a100,60\n"  # 16 per node on 8-GPU nodes: two nodes of 8
        "8,a,u,6,3,v100,60\n",  # a spread as the trace says: two nodes x 3
    )

    trace = read_trace(path, TraceFormat(groups=groups))

    assert trace.adjustments == {
        "skipped_no_gpus": 2,
        "skipped_unknown_gpu_type": 1,
        "skipped_too_large": 1,
        "skipped_bad_rows": 0,
        "rounded_up_fractional": 1,
        "reshaped_gpus_per_node": 1,
        "rounded_up_wide": 1,
    }
    assert [(job.gpus, job.gpus_per_node, job.gpu_type) for job in trace.jobs] == [
        (1, None, None),
        (16, None, "a100"),
        (12, None, None),
        (16, 8, "a100"),
        (6, 3, "v100"),
    ]
    assert trace.warnings == [
        f"warning: {path}: 2 job(s) without GPUs (gpus 0) skipped, first at line 2",
        f"warning: {path}: 1 job(s) asking for a GPU type no node has skipped, first at line 7",
        f"warning: {path}: 1 job(s) wider than every node of their type together skipped, first at line 8",
        f"warning: {path}: 1 fractional GPU request(s) rounded up to whole GPUs, first at line 4",
        f"warning: {path}: 1 job(s) asking for more GPUs per node than a node has re-split at the node size, "
        "first at line 9",
        f"warning: {path}: 1 wide job(s) not filling whole nodes rounded up to whole nodes, first at line 5",
    ]
    summary = run_simulation(
        trace_input(trace, budgets=None, nodes=group_nodes(groups)), policy="fifo"
    ).summary
    assert summary["trace_adjustments"] == trace.adjustments


def test_a_wide_job_on_uniform_nodes_is_rounded_up_to_whole_nodes_or_spread_as_the_trace_says():
    eight = (NodeGroup(4, 8),)

    assert fit_job(12, None, None, eight).gpus == 16
    assert fit_job(12, 4, None, eight) == Fit(12, 4, None)  # three nodes x 4, as written
    assert fit_job(12, 8, None, eight).gpus == 16  # 12 is not a multiple of the 8 it names
    assert fit_job(40, None, None, eight).skip == "skipped_too_large"


def test_a_malformed_row_still_stops_the_run_naming_the_line_and_the_renamed_column(tmp_path):
    path = _write(
        tmp_path, "t.csv", "submit_time,allocation,user,gpu_num,duration_s\n0,a,u,1,60\n0,a,u,-2,60\n"
    )

    with pytest.raises(TraceError) as caught:
        read_trace(path, TraceFormat(columns={"gpus": "gpu_num"}))

    assert caught.value.errors == [f"{path}:3: gpus (column 'gpu_num') must not be negative, got '-2'"]


def _wait_of_debug_job(path: Path, policy: str) -> float:
    trace = read_trace(path, TraceFormat(groups=(NodeGroup(1, 2),)))
    summary = run_simulation(
        trace_input(trace, budgets=None, nodes=group_nodes([NodeGroup(1, 2)])), policy=policy
    )
    return float(summary.summary["by_class"]["debug"]["wait_p50_s"])


def test_without_a_priority_column_the_priority_policy_puts_debug_work_above_batch(tmp_path):
    """One 2-GPU node. Batch A (2 GPUs, 100 s) at t=0, batch B (2 GPUs) at t=1, debug D (1 GPU)
    at t=2. FIFO starts D only after A and B (t=200). From the class, D outranks batch, so the
    priority policy preempts A for it at the first pass after it arrives (t=10); with a priority
    column that says 0 for everyone it is FIFO again."""
    rows = "0,lab,u,2,100,batch\n1,lab,u,2,100,batch\n2,lab,u,1,10,debug\n"
    derived = _write(tmp_path, "derived.csv", "submit_time,allocation,user,gpus,duration_s,class\n" + rows)
    flat = _write(
        tmp_path,
        "flat.csv",
        "submit_time,allocation,user,gpus,duration_s,class,priority\n" + rows.replace("\n", ",0\n"),
    )

    assert [job.priority for job in read_trace(derived).jobs] == [0, 0, 1]
    assert _wait_of_debug_job(derived, "fifo") == 198.0
    assert _wait_of_debug_job(derived, "priority") == 8.0
    assert _wait_of_debug_job(flat, "priority") == 198.0


def test_python_m_scheduling_simulator_runs_without_django_settings_a_secret_or_a_database(tmp_path):
    trace = _write(
        tmp_path,
        "t.csv",
        "submit_time,allocation,user,gpus,gpu_type,duration_s,class\n"
        "0,lab/a,alice,8,a100,600,batch\n5,lab/b,bob,0,,60,batch\n9,lab/b,bob,2,v100,60,debug\n",
    )
    cluster = _write(
        tmp_path,
        "c.json",
        '{"groups": [{"nodes": 1, "gpus_per_node": 8, "gpu_type": "a100"},'
        ' {"nodes": 1, "gpus_per_node": 4, "gpu_type": "v100"}]}',
    )
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)}
    assert not {"DJANGO_SETTINGS_MODULE", "SECRET_KEY", "DATABASE_URL"} & set(env)

    done = subprocess.run(
        [sys.executable, "-m", "scheduling.simulator", "--trace", str(trace), "--cluster-file", str(cluster),
         "--policy", "fifo,priority", "--json", "-", "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)
    assert [run["policy"] for run in runs] == ["fifo", "priority"]
    assert runs[0]["jobs"] == 2 and runs[0]["trace_adjustments"]["skipped_no_gpus"] == 1
    assert "1 job(s) without GPUs (gpus 0) skipped, first at line 3" in done.stderr
    assert "django" not in done.stderr.lower()


def test_python_m_scheduling_simulator_reports_a_bad_trace_and_fails(tmp_path):
    trace = _write(tmp_path, "t.csv", "submit_time,allocation,user,gpus,duration_s\n0,a,u,lots,60\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)}

    done = subprocess.run(
        [sys.executable, "-m", "scheduling.simulator", "--trace", str(trace), "--nodes", "1", "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert done.returncode == 1
    assert f"error: 1 bad row(s) in {trace}:\n  {trace}:2: gpus must be a number, got 'lots'" in done.stderr


def test_manage_py_simulate_takes_the_same_cluster_file_and_warns_on_its_stderr(tmp_path):
    trace = _write(
        tmp_path, "t.csv", "submit_time,allocation,user,gpus,duration_s\n0,a,u,12,60\n5,a,u,0.5,60\n"
    )
    cluster = _write(tmp_path, "c.json", '{"nodes": 2, "gpus_per_node": 8}')
    out, err = StringIO(), StringIO()

    call_command(
        "simulate", "--trace", str(trace), "--cluster-file", str(cluster), "--json", "-", "--no-progress",
        stdout=out, stderr=err,
    )  # fmt: skip

    summary = json.loads(out.getvalue())
    assert (summary["nodes"], summary["gpus"]) == (2, 16)
    assert summary["trace_adjustments"]["rounded_up_wide"] == 1
    assert summary["trace_adjustments"]["rounded_up_fractional"] == 1
    assert (
        f"warning: {trace}: 1 wide job(s) not filling whole nodes rounded up to whole nodes, first at line 2"
        in (err.getvalue())
    )


def test_a_trace_with_no_job_left_says_why(tmp_path):
    path = _write(tmp_path, "t.csv", "submit_time,allocation,user,gpus,duration_s\n0,a,u,0,60\n")

    with pytest.raises(TraceError) as caught:
        read_trace(path)

    assert caught.value.errors == [
        f"{path}: no usable rows",
        f"warning: {path}: 1 job(s) without GPUs (gpus 0) skipped, first at line 2",
    ]
