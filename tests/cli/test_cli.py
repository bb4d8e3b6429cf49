"""``gpus`` against a live server: what a researcher types, what they read, and the exit codes scripts see."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from django.utils import timezone

from gpus_cli.client import ExitCode
from portal.tokens import token_authenticate
from scheduling.models import PendingReason, Workload, WorkloadState
from scheduling.passes import run_pass
from scheduling.services import workload_submit

GPUS = str(Path(sys.executable).parent / "gpus")


def fill_the_cluster(lab) -> None:  # noqa: ANN001
    """dave's four protected 8-GPU jobs take every GPU of main, so anything else waits; they
    declare ends an hour apart."""
    for hours in range(4):
        workload_submit(actor=lab.dave, cluster=lab.main, allocation_path="lab/language", gpus=8,
                        min_runtime_s=4 * 3600, max_runtime_s=(hours + 1) * 3600,
                        metadata={"duration_s": 86400})  # fmt: skip
    run_pass(cluster_id=lab.main.pk, now=timezone.now())


def submitted_id(ran) -> int:  # noqa: ANN001
    assert ran.code == ExitCode.OK, ran.err
    return json.loads(ran.out)["id"]


def test_login_asks_for_the_password_and_saves_the_token_for_the_owner_only(lab, live_server, config_home):
    env = {**os.environ, "XDG_CONFIG_HOME": str(config_home)}
    login = subprocess.run([GPUS, "login", "--url", live_server.url, "--username", "bob"], input="pw\n",
                           capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert login.returncode == 0, login.stderr
    saved = config_home / "gpus" / "config.json"
    assert f"as bob; the token is saved in {saved}" in login.stdout
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    stored = json.loads(saved.read_text())
    assert stored["url"] == live_server.url and stored["cluster"] == ""
    issued = token_authenticate(stored["token"])  # a new token of bob's, named after this machine
    assert issued is not None and issued.user == lab.bob and issued.name.startswith("gpus on ")
    whoami = subprocess.run([GPUS, "whoami"], capture_output=True, text=True, env=env, timeout=60)
    assert whoami.returncode == 0 and whoami.stdout.startswith(f"bob on {live_server.url}")
    assert "member  lab/vision/perception" in whoami.stdout


def test_a_wrong_password_is_refused_in_the_servers_words_with_the_not_authenticated_code(
    lab, live_server, config_home
):
    env = {**os.environ, "XDG_CONFIG_HOME": str(config_home)}
    login = subprocess.run([GPUS, "login", "--url", live_server.url, "-u", "bob"], input="wrong\n",
                           capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert login.returncode == ExitCode.NOT_AUTHENTICATED
    assert "Unable to log in with the username and password given." in login.stderr
    assert not (config_home / "gpus" / "config.json").exists()


def test_the_environment_token_wins_over_the_saved_one(gpus, lab):
    assert gpus("login", "--token", lab.tokens["alice"], as_user="alice").code == 0
    ran = gpus("whoami", "--json", as_user="dave")  # GPUS_TOKEN=dave's
    assert json.loads(ran.out)["username"] == "dave"


def test_a_researcher_submits_and_sees_it_pending_with_every_field_kept(gpus, lab):
    ran = gpus("submit", "-a", "lab/vision/perception", "-g", "8", "--gpus-per-node", "8", "--class", "batch",
               "--min-runtime", "2h", "--resumable", "--max-runtime", "1d", "--checkpoint-interval", "30m",
               "--name", "train-vit", "--json", "--", "python", "train.py", "--lr", "3e-4")  # fmt: skip
    workload = Workload.objects.get(pk=submitted_id(ran))
    assert (workload.owner, workload.allocation.path, workload.gpus, workload.gpus_per_node) == (
        lab.bob, "lab/vision/perception", 8, 8)  # fmt: skip
    assert (workload.min_runtime_s, workload.max_runtime_s, workload.checkpoint_interval_s) == (
        7200,
        86400,
        1800,
    )
    assert workload.resumable and workload.name == "train-vit" and workload.state == WorkloadState.PENDING
    assert workload.metadata["command"] == "python train.py --lr 3e-4"
    readable = gpus("submit", "-a", "lab/vision/perception", "-g", "1", "-n", "debug-it", "--class", "debug")
    assert readable.code == 0 and readable.out.startswith("Submitted workload ")
    assert "charged to lab/vision/perception" in readable.out


def test_ls_lists_only_my_workloads_with_state_and_the_pending_sentence(gpus, lab):
    fill_the_cluster(lab)
    mine = submitted_id(gpus("submit", "-a", "lab/vision/perception", "-g", "8", "-n", "mine", "--json"))
    run_pass(cluster_id=lab.main.pk, now=timezone.now())
    sentence = PendingReason.objects.get(workload_id=mine).message
    ran = gpus("ls")
    assert ran.code == 0
    lines = ran.out.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "CLUSTER",
        "ALLOCATION",
        "GPUS",
        "CLASS",
        "STATE",
        "WHY",
        "PENDING",
    ]
    assert len(lines) == 2  # dave's running work is not listed
    assert lines[1].split()[:7] == [
        str(mine),
        "mine",
        "main",
        "lab/vision/perception",
        "8",
        "batch",
        "pending",
    ]
    assert lines[1].endswith(sentence)
    listed = json.loads(gpus("ls", "--json").out)
    assert [(w["id"], w["state"], w["pending_reason"]["message"]) for w in listed] == [
        (mine, "pending", sentence)
    ]
    assert json.loads(gpus("ls", "--json", as_user="dave").out)[0]["state"] == "running"


def test_why_gives_the_sentence_position_estimate_and_the_start_options(gpus, lab):
    fill_the_cluster(lab)
    waiting = submitted_id(
        gpus("submit", "-a", "lab/vision/perception", "-g", "16", "--min-runtime", "1h", "--json")
    )
    run_pass(cluster_id=lab.main.pk, now=timezone.now())
    reason = PendingReason.objects.get(workload_id=waiting)
    ran = gpus("why", waiting)
    assert ran.code == 0, ran.err
    assert ran.out.splitlines()[0] == reason.message
    assert f"Reason:          {reason.code}" in ran.out
    assert f"Position:        {reason.position}" in ran.out
    assert "Estimated start: " in ran.out
    answer = json.loads(gpus("why", waiting, "--json").out)
    assert (answer["reason"], answer["position"]) == (reason.message, reason.position)
    labels = [option["option"] for option in answer["start_options"]]
    for label in labels:
        assert f"  - {label}: " in ran.out
    # fewer GPUs would start it when the first of dave's jobs ends, not now: each option says why
    # it would still wait by the reason's plain name (its code stays in the JSON)
    waits = {(option["detail"], option["code"]) for option in answer["start_options"]}
    assert waits == {("would still wait: running work is still protected", "PROTECTED_WORK")}
    assert "  - With 8 GPUs: would still wait: running work is still protected" in ran.out


def test_queue_shows_the_clusters_order_with_the_pages_filters(gpus, lab):
    fill_the_cluster(lab)
    first = submitted_id(gpus("submit", "-a", "lab/vision/perception", "-g", "8", "--json"))
    second = submitted_id(
        gpus("submit", "-a", "lab/vision/perception", "-g", "1", "--class", "debug", "--json")
    )
    run_pass(cluster_id=lab.main.pk, now=timezone.now())
    ran = gpus("queue", as_user="charlie")
    assert ran.code == 0 and ran.out.startswith("2 workloads pending on main (9 GPUs)")
    ids = [int(line.split()[1]) for line in ran.out.splitlines()[2:]]
    order = list(
        Workload.objects.filter(state="pending")
        .order_by("pending_reason__position")
        .values_list("pk", flat=True)
    )
    assert ids == order and set(ids) == {first, second}
    debug_only = json.loads(gpus("queue", "--class", "debug", "--json").out)
    assert [row["id"] for row in debug_only["results"]] == [second]
    assert gpus("queue", "--user", "nobody").out.splitlines()[-1] == "Nothing pending matches these filters."


def test_cancel_ends_pending_work_and_a_second_cancel_is_a_conflict_in_the_servers_words(gpus, lab):
    fill_the_cluster(lab)
    workload = submitted_id(gpus("submit", "-a", "lab/vision/perception", "-g", "8", "--json"))
    ran = gpus("cancel", workload)
    assert (ran.code, ran.out) == (0, f"Workload {workload}: cancelled\n")
    assert Workload.objects.get(pk=workload).state == WorkloadState.CANCELLED
    again = gpus("cancel", workload)
    assert again.code == ExitCode.CONFLICT
    assert again.err == f"gpus: workload {workload} is already cancelled\n"


def test_hold_and_release_show_in_ls_and_only_the_owner_manager_or_staff_may(gpus, lab):
    fill_the_cluster(lab)
    workload = submitted_id(gpus("submit", "-a", "lab/vision/perception", "-g", "8", "--json"))
    held = gpus("hold", workload, "--note", "data not ready")
    assert held.code == 0 and "held" in held.out
    assert Workload.objects.get(pk=workload).held_note == "data not ready"
    assert "pending (held)" in gpus("ls").out
    refused = gpus("release", workload, as_user="charlie")  # a viewer of lab
    assert refused.code == ExitCode.FORBIDDEN
    assert "Only the owner, a manager of its allocation or on-call staff may do that." in refused.err
    assert gpus("release", workload, as_user="alice").code == 0  # alice manages vision
    assert not Workload.objects.get(pk=workload).held
    assert gpus("release", workload).code == ExitCode.CONFLICT


def test_budget_shows_delivered_against_owed_the_shares_and_the_children(gpus, lab):
    ran = gpus("budget", "lab/vision", as_user="alice")
    assert ran.code == 0, ran.err
    assert ran.out.startswith("lab/vision on main, last 7 days")
    assert "Allocation:       16.0 GPUs" in ran.out
    assert "Share of parent:  50.0%" in ran.out
    assert "Delivered / owed: " in ran.out
    child = next(line for line in ran.out.splitlines() if line.startswith("lab/vision/perception"))
    assert child.split()[:3] == ["lab/vision/perception", "8.0", "50.0%"]
    data = json.loads(gpus("budget", "lab/vision", "--json").out)
    assert data["node"]["path"] == "lab/vision" and data["allocation_gpus"] == 16.0
    assert [c["path"] for c in data["children"]] == ["lab/vision/perception"]
    top = gpus("budget")
    assert top.out.startswith("lab on main")
    missing = gpus("budget", "lab/nowhere")
    assert (missing.code, missing.err) == (
        ExitCode.NOT_FOUND,
        "gpus: no budget node 'lab/nowhere' on this cluster\n",
    )


def test_a_bad_token_exits_not_authenticated_with_the_servers_words(gpus):
    ran = gpus("ls", token="not-a-token")
    assert (ran.code, ran.err) == (ExitCode.NOT_AUTHENTICATED, "gpus: Invalid, expired or revoked token.\n")
    assert gpus("ls", as_user=None).code == ExitCode.NOT_AUTHENTICATED


def test_a_refused_submission_shows_each_field_error_as_the_server_wrote_it(gpus):
    ran = gpus("submit", "-a", "lab/vision/perception", "-g", "12", "--checkpoint-interval", "0")
    assert ran.code == ExitCode.REFUSED
    assert "gpus: 12 GPUs need more than one 8-GPU node" in ran.err
    assert "checkpoint_interval_s: The checkpoint interval must be positive" in ran.err
    assert Workload.objects.count() == 0
    assert gpus("why", 999999).err == "gpus: No such workload.\n"


def test_a_server_failure_exits_server_error_with_the_servers_own_page_text(gpus, monkeypatch):
    def broken(**kwargs: object) -> None:
        raise RuntimeError("the database is on fire")

    monkeypatch.setattr("scheduling.api.views.workload_list", broken)
    ran = gpus("ls")
    assert ran.code == ExitCode.SERVER_ERROR
    assert ran.err == "gpus: the server failed (HTTP 500): Server Error (500)\n"


def test_a_usage_mistake_exits_2_and_an_unreachable_server_8(gpus, monkeypatch):
    assert gpus("submit", "-g", "4").code == ExitCode.USAGE  # no allocation
    assert gpus("submit", "-a", "x", "-g", "4", "--min-runtime", "soon").code == ExitCode.USAGE
    monkeypatch.setenv("GPUS_URL", "http://127.0.0.1:9")
    from gpus_cli.main import main

    assert main(["ls"]) == ExitCode.UNREACHABLE


def test_a_gpu_type_the_cluster_lacks_is_refused_and_a_checkpoint_without_resumable_warns(gpus):
    refused = gpus("submit", "-a", "lab/vision/perception", "-g", "1", "--gpu-type", "H100")
    assert (refused.code, refused.err) == (
        ExitCode.REFUSED,
        "gpus: gpu_type: main has no H100 GPUs; its nodes have: A100.\n",
    )
    warned = gpus("submit", "-a", "lab/vision/perception", "-g", "1", "--checkpoint-interval", "10m")
    assert warned.code == 0
    assert (
        warned.err
        == "warning: A checkpoint interval only matters for resumable work: a preemption ends this workload.\n"
    )
    assert Workload.objects.get().checkpoint_interval_s == 600


def test_renew_extends_a_busy_sessions_protection_and_says_why_not_when_it_may_not(gpus, lab):
    workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=1,
                    workload_class="interactive", min_runtime_s=1800, metadata={"duration_s": 86400})  # fmt: skip
    batch = workload_submit(actor=lab.bob, cluster=lab.main, allocation_path="lab/vision/perception", gpus=1,
                            min_runtime_s=1800, metadata={"duration_s": 86400}).workload  # fmt: skip
    run_pass(cluster_id=lab.main.pk, now=timezone.now())
    session = Workload.objects.get(workload_class="interactive")
    assert session.state == WorkloadState.RUNNING

    ran = gpus("renew", session.pk)

    assert ran.code == 0, ran.err
    assert ran.out.startswith(f"Workload {session.pk}: protected until ") and "(1 renewal left" in ran.out
    refused = gpus("renew", batch.pk)
    assert refused.code == ExitCode.REFUSED
    assert "workload_class: Only interactive sessions can renew their protection" in refused.err
