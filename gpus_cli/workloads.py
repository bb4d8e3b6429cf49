"""Workload commands: submit, ls, why, queue, cancel, hold, release, renew."""

from __future__ import annotations

import shlex

import click

from gpus_cli import output
from gpus_cli.main import Session, cli, cluster_option, json_option, pass_session

CLASSES = click.Choice(["batch", "debug", "interactive"])


class Duration(click.ParamType):
    """``90s``, ``30m``, ``2h``, ``1h30m`` or plain seconds."""

    name = "duration"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return output.seconds_from(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


DURATION = Duration()


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--allocation", "-a", required=True, help="Budget node path, e.g. lab/vision/perception.")
@click.option("--gpus", "-g", type=int, required=True, help="GPUs in all.")
@click.option("--gpus-per-node", type=int, help="GPUs on each node (multi-node work).")
@click.option("--gpu-type", default="", help="e.g. H100 (default: the cluster's).")
@click.option("--class", "workload_class", type=CLASSES, default="batch", show_default=True)
@click.option(
    "--min-runtime", type=DURATION, default="0", help="Protected this long, e.g. 2h (0: preemptible)."
)
@click.option(
    "--resumable/--not-resumable", default=False, help="Preemption requeues it instead of ending it."
)
@click.option("--max-runtime", type=DURATION, help="Declared maximum runtime, e.g. 30m (helps it backfill).")
@click.option("--checkpoint-interval", type=DURATION, help="How often it saves progress, e.g. 30m.")
@click.option("--name", "-n", default="", help="A name to find it by.")
@click.option("--image", default="", help="Container image (kept with the workload).")
@cluster_option
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_session
def submit(
    session: Session, cluster: str | None, as_json: bool, command: tuple[str, ...], **fields: object
) -> None:
    """Submit a workload: gpus submit -a lab/vision -g 8 --min-runtime 2h --resumable -- python train.py"""
    body = {
        "cluster": session.cluster(cluster), "allocation": fields["allocation"], "gpus": fields["gpus"],
        "gpus_per_node": fields["gpus_per_node"], "gpu_type": fields["gpu_type"],
        "workload_class": fields["workload_class"], "min_runtime_s": fields["min_runtime"],
        "resumable": fields["resumable"], "max_runtime_s": fields["max_runtime"],
        "checkpoint_interval_s": fields["checkpoint_interval"], "name": fields["name"],
        "image": fields["image"], "command": shlex.join(command),
    }  # fmt: skip
    created = session.api.post("workloads/", {k: v for k, v in body.items() if v is not None})
    for warning in created.get("warnings", []):
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        return output.as_json(created)
    click.echo(
        f"Submitted workload {created['id']} ({created['state']}): {created['gpus']} GPUs on "
        f"{created['cluster']}, charged to {created['allocation'] or 'no budget'}. "
        f"Follow it with: gpus why {created['id']}"
    )
    return None


def _why(workload: dict) -> str:
    if workload["state"] != "pending":
        return ""
    reason = workload.get("pending_reason") or {}
    return reason.get("message") or "waiting for the next scheduling pass"


@cli.command(name="ls")
@click.option(
    "--state", type=click.Choice(["pending", "running", "completed", "failed", "cancelled", "preempted"])
)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Newest first.")
@cluster_option
@json_option
@pass_session
def list_mine(session: Session, state: str | None, limit: int, cluster: str | None, as_json: bool) -> None:
    """My workloads, newest first, with their state and why the pending ones wait."""
    page = session.api.get("workloads/", mine="true", state=state, cluster=cluster, limit=limit)
    if as_json:
        return output.as_json(page["results"])
    rows = [
        (w["id"], w["name"] or "-", w["cluster"], w["allocation"] or "unfunded", w["gpus"], w["workload_class"],
         w["state"] + (" (held)" if w["held"] else ""), _why(w))
        for w in page["results"]
    ]  # fmt: skip
    output.table(["ID", "NAME", "CLUSTER", "ALLOCATION", "GPUS", "CLASS", "STATE", "WHY PENDING"], rows,
                 empty="You have no workloads" + (f" {state}" if state else "") + ".")  # fmt: skip
    if page["count"] > len(rows):
        click.echo(f"({len(rows)} of {page['count']}; --limit shows more)")
    return None


@cli.command()
@click.argument("workload_id", type=int)
@json_option
@pass_session
def why(session: Session, workload_id: int, as_json: bool) -> None:
    """Why a workload is pending: the sentence, its position, the estimate, and what would start it sooner."""
    answer = session.api.get(f"workloads/{workload_id}/why-pending/")
    options = session.api.get(f"workloads/{workload_id}/start-options/")["options"]
    if as_json:
        return output.as_json({**answer, "start_options": options})
    if answer["state"] != "pending":
        click.echo(f"Workload {workload_id} is {answer['state']}, not pending.")
        return None
    click.echo(answer["reason"] or "Waiting for the next scheduling pass.")
    output.pairs([
        ("Reason", answer["reason_code"] or "-"), ("Position", answer["position"] or "-"),
        ("Waiting", output.duration(answer["wait_s"])), ("Estimated start", output.moment(answer["estimated_start"])),
        ("Allocation", answer["allocation"] or "unfunded"),
    ])  # fmt: skip
    if options:
        click.echo("What would start it sooner:")
        for option in options:
            when = "would start in the next pass" if option["starts_now"] else option["detail"]
            click.echo(f"  - {option['option']}: {when}")
    return None


@cli.command()
@cluster_option
@click.option("--allocation", "-a", help="Only this budget node and below.")
@click.option("--user", "-u", help="Only this user's workloads.")
@click.option("--class", "workload_class", type=CLASSES)
@click.option("--reason", help="Only this pending reason code, e.g. FAIR_SHARE_QUEUED.")
@json_option
@pass_session
def queue(
    session: Session, cluster: str | None, workload_class: str | None, as_json: bool, **filters: str
) -> None:
    """A cluster's pending workloads in scheduling order (the filters of the queue page)."""
    slug = session.cluster(cluster)
    answer = session.api.get(f"queue/{slug}/", **filters, **{"class": workload_class})
    if as_json:
        return output.as_json(answer)
    click.echo(f"{answer['workloads']} workloads pending on {slug} ({answer['gpus']} GPUs)")
    rows = [
        (r["position"] or "-", r["id"], r["allocation"] or "unfunded", r["user"], r["gpus"], r["workload_class"],
         output.duration(r["wait_s"]), output.moment(r["estimated_start"]), r["reason"] or "-")
        for r in answer["results"]
    ]  # fmt: skip
    output.table(["#", "ID", "ALLOCATION", "USER", "GPUS", "CLASS", "WAITING", "EST. START", "WHY"], rows,
                 empty="Nothing pending" + (" matches these filters." if answer["filters"] else "."))  # fmt: skip
    return None


def _acted(session: Session, verb: str, workload_ids: tuple[int, ...], as_json: bool, **body: object) -> None:
    """POST ``verb`` for each workload in turn; the first refusal stops (its exit code is the command's)."""
    done = []
    for workload_id in workload_ids:
        workload = session.api.post(f"workloads/{workload_id}/{verb}/", body or None)
        done.append(workload)
        if not as_json:
            click.echo(f"Workload {workload_id}: {_state_after(verb, workload)}")
    if as_json:
        output.as_json(done)


def _state_after(verb: str, workload: dict) -> str:
    if verb == "cancel" and workload["state"] == "running":
        return "cancel requested; the next scheduling pass stops it"
    if verb == "hold":
        return "held (it will not start until released)"
    return workload["state"] + (" (held)" if workload["held"] else "")


@cli.command()
@click.argument("workload_ids", nargs=-1, type=int, required=True)
@json_option
@pass_session
def cancel(session: Session, workload_ids: tuple[int, ...], as_json: bool) -> None:
    """Cancel workloads: pending ones end now, running ones at the next pass."""
    _acted(session, "cancel", workload_ids, as_json)


@cli.command()
@click.argument("workload_ids", nargs=-1, type=int, required=True)
@click.option("--note", default="", help="Why (shown in the pending reason).")
@json_option
@pass_session
def hold(session: Session, workload_ids: tuple[int, ...], note: str, as_json: bool) -> None:
    """Keep pending workloads from starting until released."""
    _acted(session, "hold", workload_ids, as_json, note=note)


@cli.command()
@click.argument("workload_ids", nargs=-1, type=int, required=True)
@json_option
@pass_session
def release(session: Session, workload_ids: tuple[int, ...], as_json: bool) -> None:
    """Let held workloads start again."""
    _acted(session, "release", workload_ids, as_json)


@cli.command()
@click.argument("workload_id", type=int)
@json_option
@pass_session
def renew(session: Session, workload_id: int, as_json: bool) -> None:
    """Renew a busy interactive session's protection from preemption (a few times a day)."""
    renewed = session.api.post(f"workloads/{workload_id}/renew-protection/")
    if as_json:
        output.as_json(renewed)
        return
    left = renewed["renewals_left"]
    click.echo(
        f"Workload {workload_id}: protected until {renewed['protected_until']} "
        f"({left} renewal{'s' if left != 1 else ''} left in the last 24 hours)"
    )
