"""``gpus budget [PATH]``: delivered against owed, the shares, and the children, like the delivery page."""

from __future__ import annotations

import click

from gpus_cli import output
from gpus_cli.client import ApiError, ExitCode
from gpus_cli.main import Session, cli, cluster_option, json_option, pass_session


@cli.command()
@click.argument("path", required=False)
@cluster_option
@click.option("--days", type=click.Choice(["7", "30", "90"]), default="7", show_default=True)
@json_option
@pass_session
def budget(session: Session, path: str | None, cluster: str | None, days: str, as_json: bool) -> None:
    """A budget node (default: the top of the tree): delivered / owed GPU-hours, shares, its children."""
    slug = session.cluster(cluster)
    tree = session.api.get("budget-nodes/tree/", cluster=slug)
    rows = {row["id"]: row for row in tree["nodes"]}
    node = _node(tree["nodes"], path)
    delivery = session.api.get(f"delivery/{slug}/{node['id']}/", days=days)
    if as_json:
        return output.as_json({**delivery, "share_of_parent": node["share"],
                               "children_share_of_parent": {c["path"]: rows.get(c["id"], {}).get("share") for c in delivery["children"]}})  # fmt: skip
    click.echo(f"{node['path']} on {slug}, last {days} days")
    output.pairs([
        ("Allocation", f"{output.number(delivery['allocation_gpus'])} GPUs"),
        ("Share of parent", output.percent(_float(node["share"]))),
        ("Entitlement", f"{output.number(delivery['entitlement_gpus'])} GPUs"),
        ("Fair-share ratio", output.number(delivery["fair_share_ratio"], 2)),
        ("Delivered / owed", f"{output.number(delivery['delivered_gpu_hours'])} / "
                             f"{output.number(delivery['owed_gpu_hours'])} GPU-h "
                             f"({output.percent(delivery['delivered_owed_ratio'])})"),
    ])  # fmt: skip
    children = [
        (c["path"], output.number(c["allocation_gpus"]), output.percent(_float(rows.get(c["id"], {}).get("share"))),
         output.number(c["delivered_gpu_hours"]), output.number(c["owed_gpu_hours"]),
         output.percent(c["delivered_owed_ratio"]), "under 95%" if c["under_95pct"] else "")
        for c in delivery["children"]
    ]  # fmt: skip
    if children:
        click.echo("Children:")
        output.table(
            ["PATH", "GPUS", "SHARE", "DELIVERED GPU-H", "OWED GPU-H", "DELIVERED/OWED", ""], children
        )
    return None


def _node(nodes: list[dict], path: str | None) -> dict:
    """The tree row with ``path``, or the top of the tree when no path is given."""
    if path is None:
        if not nodes:
            raise ApiError("the budget tree is empty", ExitCode.NOT_FOUND)
        return nodes[0]
    found = next((row for row in nodes if row["path"] == path.strip("/")), None)
    if found is None:
        raise ApiError(f"no budget node {path!r} on this cluster", ExitCode.NOT_FOUND)
    return found


def _float(value: str | float | None) -> float | None:
    """A share as the API sends it (a decimal string or a number), or None."""
    return None if value is None else float(value)
