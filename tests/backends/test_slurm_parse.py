"""Slurm's JSON parsed into plain classes, on output captured from the real 22.05 test cluster."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from scheduling.backends.base import BackendUnavailable, CancelAction, JobState, PreemptAction, StartAction
from scheduling.backends.slurm import SlurmBackend, SlurmCli, SlurmCommandError, SlurmSettings, observed_state
from scheduling.backends.slurm_parse import (
    SlurmJob,
    SlurmReportedError,
    expand_hostlist,
    parse_comment,
    parse_duration,
    parse_sacct,
    parse_sinfo,
    parse_squeue,
)

FIXTURES = Path(__file__).parent / "fixtures"
CONTROLLER_DOWN = (FIXTURES / "squeue_controller_down.json").read_text()


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class CapturedSlurm:
    """Answers squeue and sinfo with the captured JSON; records every other command."""

    def __init__(self, squeue: str = "squeue.json", *, squeue_text: str = "") -> None:
        self.squeue_text = squeue_text or fixture(squeue)
        self.commands: list[tuple[str, ...]] = []

    def run(self, *args: str) -> str:
        if args[0] in ("squeue", "sinfo"):
            return self.squeue_text if args[0] == "squeue" else fixture("sinfo.json")
        self.commands.append(args)
        return ""


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86400),
        ("1h30m", 5400),
        ("0", 0),
        ("", None),
        ("soon", None),
        ("2h later", None),
    ],
    ids=lambda value: repr(value),
)
def test_durations_in_job_comments_are_read_in_seconds(text, seconds):
    assert parse_duration(text) == seconds


def test_comment_keys_are_read_whatever_the_separator():
    assert parse_comment("min_runtime=2h, resumable=yes;user=alice note") == {
        "min_runtime": "2h",
        "resumable": "yes",
        "user": "alice",
    }


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("n1", ("n1",)),
        ("n[1-3]", ("n1", "n2", "n3")),
        ("n[1,3],gpu7", ("gpu7", "n1", "n3")),
        ("gpu[08-10]", ("gpu08", "gpu09", "gpu10")),
        ("", ()),
    ],
)
def test_slurm_host_lists_expand_to_sorted_node_names(expression, names):
    assert expand_hostlist(expression) == names


def test_sinfo_gives_each_node_its_gpus_and_health():
    nodes = {node.name: node for node in parse_sinfo(fixture("sinfo.json"))}

    assert [nodes[name].gpus for name in sorted(nodes)] == [8, 8, 8, 8]
    assert nodes["n1"].healthy and nodes["n3"].healthy
    assert not nodes["n2"].healthy and nodes["n2"].health_reason == "DRAIN: bad gpu"
    assert not nodes["n4"].healthy and nodes["n4"].health_reason == "DOWN: power"


def test_squeue_gives_held_running_and_ended_jobs_in_job_id_order():
    jobs = parse_squeue(fixture("squeue.json"))

    assert [(job.job_id, job.state) for job in jobs] == [
        (1, "PENDING"),
        (2, "RUNNING"),
        (3, "PENDING"),
        (4, "COMPLETED"),
        (5, "CANCELLED"),
        (6, "FAILED"),
    ]
    requeued, gang = jobs[0], jobs[2]
    assert requeued.held and requeued.restarts == 1 and requeued.requeue
    assert (gang.gpus, gang.gpus_per_node, gang.node_count) == (16, 8, 2)


def test_sacct_keeps_one_row_per_run_of_a_requeued_job():
    runs = parse_sacct(fixture("sacct.json"))

    first_run_of_job_1 = runs[0]
    assert (first_run_of_job_1.job_id, first_run_of_job_1.state) == (1, "REQUEUED")
    assert first_run_of_job_1.nodes == "n1" and first_run_of_job_1.ended_at > first_run_of_job_1.started_at


def test_a_controller_that_does_not_answer_is_reported_as_errors_not_as_an_empty_queue():
    with pytest.raises(SlurmReportedError, match="slurm_load_jobs"):
        parse_squeue(CONTROLLER_DOWN)


def observed():
    backend = SlurmBackend(SlurmSettings(default_min_runtime_s=600), cli=CapturedSlurm())
    return backend.observe()


def test_observed_nodes_carry_health_and_the_clusters_gpu_type_for_untyped_gres():
    nodes = observed().nodes

    assert [(node.name, node.healthy, node.gpu_type) for node in nodes] == [
        ("n1", True, "gpu"),
        ("n2", False, "gpu"),
        ("n3", True, "gpu"),
        ("n4", False, "gpu"),
    ]


def test_a_natively_submitted_job_brings_account_path_min_runtime_and_resumability():
    train = observed().jobs[0]

    assert train.workload_id is None and train.state is JobState.WAITING
    assert (train.account, train.user, train.gpus) == ("ai2/nlp", "root", 4)
    assert (train.min_runtime_s, train.resumable, train.attempt) == (7200, True, 2)


@pytest.mark.parametrize(
    ("submitter", "workload_id", "user"), [("portal", 7, "alice"), ("mallory", None, "mallory")]
)
def test_only_the_portals_own_jobs_speak_for_a_workload_and_a_user_in_their_comment(
    submitter, workload_id, user
):
    document = json.loads(fixture("squeue.json"))
    document["jobs"][0].update(comment="workload=7,user=alice,min_runtime=2h", user_name=submitter)
    slurm = CapturedSlurm(squeue_text=json.dumps(document))

    job = SlurmBackend(SlurmSettings(run_as="portal"), cli=slurm).observe().jobs[0]

    assert (job.workload_id, job.user, job.min_runtime_s) == (workload_id, user, 7200)


def test_a_job_without_a_min_runtime_gets_the_cluster_default_and_is_not_resumable_without_requeue():
    evaluation = observed().jobs[1]

    assert (evaluation.min_runtime_s, evaluation.resumable) == (600, False)
    assert evaluation.state is JobState.RUNNING and evaluation.nodes == ("n1",)
    assert evaluation.started_at is not None and evaluation.ended_at is None


def test_ended_jobs_are_reported_with_how_they_ended_and_only_started_ones_with_a_start():
    completed, cancelled, failed = observed().jobs[3:]

    assert (completed.state, completed.nodes) == (JobState.COMPLETED, ("n3",))
    assert cancelled.state is JobState.CANCELLED and cancelled.started_at is None
    assert cancelled.ended_at is not None
    assert failed.state is JobState.FAILED


def test_an_unanswering_controller_makes_observe_raise_backend_unavailable():
    backend = SlurmBackend(cli=CapturedSlurm(squeue="squeue_controller_down.json"))

    with pytest.raises(BackendUnavailable):
        backend.observe()


def applied(*actions):
    slurm = CapturedSlurm()
    SlurmBackend(cli=slurm).apply(list(actions))
    return slurm.commands


def test_starting_a_waiting_gang_pins_its_nodes_and_makes_it_eligible_now():
    commands = applied(StartAction(workload_id=7, ref="3", attempt=1, placement=(("n3", 8), ("n1", 8))))

    assert commands == [
        (
            "scontrol",
            "update",
            "JobId=3",
            "NodeList=n1,n3",
            "StartTime=now",
            "AdminComment=portal_attempt=1,portal_restarts=0 | started by the GPU portal",
        ),  # fmt: skip
    ]


def test_restarting_a_job_the_portal_requeued_and_held_releases_it():
    commands = applied(StartAction(workload_id=1, ref="1", attempt=2, placement=(("n2", 4),)))

    assert commands[-1] == ("scontrol", "release", "1")


def test_actions_on_jobs_already_in_the_wanted_state_send_nothing():
    commands = applied(
        StartAction(workload_id=2, ref="2", attempt=0, placement=(("n1", 2),)),
        PreemptAction(workload_id=1, ref="1", attempt=1, requeue=True),
        CancelAction(workload_id=4, ref="4"),
        CancelAction(workload_id=99, ref="99"),
    )

    assert commands == []


def test_preempting_requeues_and_holds_resumable_work_and_cancels_the_rest():
    commands = applied(
        PreemptAction(workload_id=2, ref="2", attempt=0, requeue=False),
        PreemptAction(workload_id=5, ref="2", attempt=0, requeue=True),
    )

    assert commands == [
        ("scontrol", "update", "JobId=2",
         "AdminComment= | preempted by the GPU portal: its GPUs were given to other work"),
        ("scancel", "2"),
        ("scontrol", "update", "JobId=2", "AdminComment=portal_hold=1"),  # the hold reads as the portal's
        ("scontrol", "requeuehold", "2"),
    ]  # fmt: skip


def test_a_slurm_command_that_outlives_its_timeout_is_backend_unavailable():
    cli = SlurmCli(SlurmSettings(timeout_s=0.2))

    with pytest.raises(BackendUnavailable, match="did not answer within 0.2 s"):
        cli.run("sleep", "5")


@pytest.mark.parametrize(
    ("stderr", "error"),
    [
        ("slurm_load_jobs error: Unable to contact slurm controller (connect failure)", BackendUnavailable),
        ("Unexpected message received for job 31", BackendUnavailable),
        ("scontrol: error: Invalid job id specified", SlurmCommandError),
    ],
    ids=["controller unreachable", "controller restarting", "a refused request"],
)
def test_a_failing_slurm_command_is_unavailability_only_when_the_controller_did_not_answer(stderr, error):
    cli = SlurmCli(SlurmSettings())

    with pytest.raises(error):
        cli.run("sh", "-c", f"echo '{stderr}' >&2; exit 1")


def pending(**changes: object) -> SlurmJob:
    gang = parse_squeue(fixture("squeue.json"))[2]
    return replace(gang, **changes)


@pytest.mark.parametrize(
    ("job", "state"),
    [
        (pending(held=True), JobState.WAITING),
        (pending(held=False, admin_comment="portal_attempt=1,portal_restarts=0"), JobState.RUNNING),
        (
            pending(held=False, admin_comment="portal_attempt=1,portal_restarts=0", restarts=1),
            JobState.WAITING,
        ),
        (
            pending(held=True, admin_comment="portal_attempt=1,portal_restarts=0", restarts=1),
            JobState.WAITING,
        ),
        (pending(held=True, state="COMPLETING", restarts=1), JobState.WAITING),
        (pending(held=False, state="COMPLETING"), JobState.RUNNING),
    ],
    ids=[
        "held: waits for the portal",
        "released by the portal, nodes still freeing: admitted",
        "requeued by Slurm after a node failure: waits for the portal again",
        "requeued and held by the portal: waits",
        "requeued and held, processes still being killed: waits",
        "cancelled, processes still being killed: still running",
    ],
)
def test_pending_and_completing_jobs_are_running_only_when_the_portal_admitted_them(job, state):
    assert observed_state(job) is state


def test_a_clusters_backend_settings_configure_the_adapter_it_gets():
    from scheduling.backends.registry import backend_for
    from scheduling.models import Cluster

    cluster = Cluster(name="s", slug="s", backend_kind="slurm", gpu_type="A100",
                      backend_settings={"slurm_conf": "/etc/x/slurm.conf", "timeout_s": 3, "unknown": 1})  # fmt: skip

    adapter = backend_for(cluster)

    assert isinstance(adapter, SlurmBackend)
    assert (adapter.settings.gpu_type, adapter.settings.timeout_s) == ("A100", 3)
    assert adapter.cli.env["SLURM_CONF"] == "/etc/x/slurm.conf"


def test_an_arrays_pending_record_is_read_as_one_job_per_task_sharing_its_submit_time():
    import json

    from scheduling.backends.slurm_parse import expand_array_tasks, read_squeue

    record = {"job_id": 120, "array_job_id": 120, "array_task_id": 4294967294, "array_task_string": "1-3,7:2%2",
              "job_state": "PENDING", "submit_time": 1000, "tres_req_str": "gres/gpu=1", "priority": 1,
              "time_limit": 5}  # fmt: skip
    broken = {"job_id": 121, "job_state": "PENDING", "tres_req_str": 7}

    jobs, unreadable = read_squeue(json.dumps({"jobs": [record, broken]}))

    assert expand_array_tasks("1-3,7:2%2") == (1, 2, 3, 7)
    assert [job.ref for job in jobs] == ["120_1", "120_2", "120_3", "120_7"]
    assert {(job.submitted_at, job.time_limit_s) for job in jobs} == {(1000.0, 300.0)}
    assert [ref for ref, _ in unreadable] == ["121"]
