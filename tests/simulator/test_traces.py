"""Reading job traces and budgets from CSV: renames, time formats, and errors with line numbers."""

from __future__ import annotations

import pytest

from scheduling.policy import BudgetNodeSpec
from scheduling.simulator.traces import (
    TraceError,
    TraceFormat,
    budget_tree,
    cluster_nodes,
    parse_column_map,
    read_budgets,
    read_trace,
    trace_input,
)


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_it_reads_our_own_format_with_optional_columns(tmp_path):
    path = _write(
        tmp_path,
        "trace.csv",
        "submit_time,allocation,user,gpus,duration_s,min_runtime_s,resumable,class,max_runtime_s,priority\n"
        "100,nlp/olmo,alice,8,3600,600,yes,batch,7200,3\n"
        "40,vision,bob,1,60,,,debug,,\n",
    )

    trace = read_trace(path)

    first, second = trace.jobs
    assert (first.id, first.user, first.submit_s, first.gpus, first.workload_class) == (
        1,
        "bob",
        0.0,
        1,
        "debug",
    )
    assert (second.submit_s, second.min_runtime_s, second.resumable, second.max_runtime_s) == (
        60.0,
        600.0,
        True,
        7200.0,
    )
    assert (second.priority, second.allocation, second.ref) == (3, "nlp/olmo", "line-2")


def test_the_checkpoint_column_may_have_the_apis_name(tmp_path):
    header = "submit_time,allocation,user,gpus,duration_s,resumable,{}\n"
    rows = "0,lab,alice,8,3600,yes,600\n10,lab,bob,8,3600,yes,\n"
    for column in ("checkpoint_s", "checkpoint_interval_s"):
        trace = read_trace(_write(tmp_path, f"{column}.csv", header.format(column) + rows))
        assert [job.checkpoint_s for job in trace.jobs] == [600.0, 1800.0]  # empty: the default


def test_helios_style_columns_replay_after_a_rename_with_iso_times_and_start_end(tmp_path):
    path = _write(
        tmp_path,
        "helios.csv",
        "job_id,user,vc,gpu_num,submit_time,start_time,end_time\n"
        "j1,u1,vc6YE,8,2020-04-01 00:00:00,2020-04-01 00:05:00,2020-04-01 01:05:00\n"
        "j2,u2,vcLJZ,16,2020-04-01T00:10:00Z,2020-04-01 00:20:00,2020-04-01 00:50:00\n",
    )
    columns = parse_column_map(["allocation=vc", "gpus=gpu_num", "id=job_id"])

    trace = read_trace(path, TraceFormat(columns=columns, allocation_prefix="helios/"))

    assert [(job.allocation, job.submit_s, job.duration_s, job.ref) for job in trace.jobs] == [
        ("helios/vc6YE", 0.0, 3600.0, "j1"),
        ("helios/vcLJZ", 600.0, 1800.0, "j2"),
    ]


def test_pai_style_gpu_percentages_are_scaled_and_rounded_up(tmp_path):
    path = _write(
        tmp_path,
        "pai.csv",
        "submit_time,allocation,user,plan_gpu,duration_s\n0,pai,u,50,10\n5,pai,u,200,10\n",
    )

    trace = read_trace(path, TraceFormat(columns={"gpus": "plan_gpu"}, gpu_scale=0.01))

    assert [job.gpus for job in trace.jobs] == [1, 2]


def test_every_bad_row_is_reported_with_its_line_number(tmp_path):
    path = _write(
        tmp_path,
        "bad.csv",
        "submit_time,allocation,user,gpus,duration_s,class,resumable\n"
        "0,a,alice,1,60,batch,no\n"
        "yesterday,a,alice,1,60,batch,no\n"
        "0,a,alice,two,60,batch,no\n"
        "0,a,alice,12,60,batch,no\n"
        "0,a,,1,60,batch,no\n"
        "0,a,alice,1,-5,batch,no\n"
        "0,a,alice,1,60,training,no\n"
        "0,a,alice,1,60,batch,maybe\n"
        "0,a,alice,-1,60,batch,no\n",
    )

    with pytest.raises(TraceError) as caught:
        read_trace(path)

    assert caught.value.errors == [
        f"{path}:3: submit_time must be seconds or ISO 8601, got 'yesterday'",
        f"{path}:4: gpus must be a number, got 'two'",
        f"{path}:6: user is empty",
        f"{path}:7: duration must be positive, got -5 s",
        f"{path}:8: class must be one of debug, interactive, batch, got 'training'",
        f"{path}:9: resumable must be true or false, got 'maybe'",
        f"{path}:10: gpus must not be negative, got '-1'",
    ]
    assert str(caught.value).startswith(f"7 bad row(s) in {path}:\n  {path}:3: ")


def test_bad_rows_can_be_skipped_and_are_still_listed(tmp_path):
    path = _write(tmp_path, "t.csv", "submit_time,allocation,user,gpus,duration_s\n0,a,u,1,60\n0,a,u,x,60\n")

    trace = read_trace(path, skip_bad_rows=True)

    assert len(trace.jobs) == 1
    assert trace.skipped == [f"{path}:3: gpus must be a number, got 'x'"]


def test_a_missing_column_names_the_column_and_the_rename_flag_it_would_need(tmp_path):
    path = _write(tmp_path, "t.csv", "submit,allocation,user,gpus\n0,a,u,1\n")

    with pytest.raises(TraceError) as caught:
        read_trace(path)

    assert caught.value.errors == [
        f"{path}:1: missing column(s): submit_time (column 'submit_time'), start_time (column 'start_time'), "
        "end_time (column 'end_time'); give duration_s, or start_time and end_time"
    ]


def test_budget_errors_carry_line_numbers(tmp_path):
    path = _write(tmp_path, "b.csv", "allocation,gpus\nnlp,100\nnlp,50\nvision,lots\n/,3\nrobots,-1\n")

    with pytest.raises(TraceError) as caught:
        read_budgets(path)

    assert caught.value.errors == [
        f"{path}:3: allocation 'nlp' is listed twice",
        f"{path}:4: gpus must be a number, got 'lots'",
        f"{path}:5: allocation must be a path like org/team, got '/'",
        f"{path}:6: gpus must be zero or more, got '-1'",
    ]


def test_the_tree_follows_from_the_paths_and_unlisted_parents_sum_their_children():
    tree = budget_tree({"ai2/nlp": 40.0, "ai2/vision": 20.0}, ["ai2/nlp/olmo", "other"])

    assert tree == (
        BudgetNodeSpec("ai2", None, 60.0),
        BudgetNodeSpec("other", None, 0.0),
        BudgetNodeSpec("ai2/nlp", "ai2", 40.0),
        BudgetNodeSpec("ai2/vision", "ai2", 20.0),
        BudgetNodeSpec("ai2/nlp/olmo", "ai2/nlp", 0.0),
    )


def test_without_budgets_every_allocation_gets_an_equal_share_of_85_percent(tmp_path):
    path = _write(
        tmp_path, "t.csv", "submit_time,allocation,user,gpus,duration_s\n0,a,u,1,60\n86400,b,u,1,60\n"
    )

    inputs = trace_input(read_trace(path), budgets=None, nodes=cluster_nodes(2, 8))

    assert {spec.path: spec.budget for spec in inputs.tree} == {"a": 6.8, "b": 6.8}
    assert inputs.days == 1.0


def test_a_column_rename_must_name_a_known_field():
    with pytest.raises(ValueError, match="--map expects FIELD=COLUMN"):
        parse_column_map(["vc=allocation"])
