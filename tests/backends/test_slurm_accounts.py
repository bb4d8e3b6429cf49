"""Budget paths as Slurm account names, and the sacctmgr mirror of the budget tree."""

from __future__ import annotations

import time
import uuid
from decimal import Decimal

import pytest
from django.core.management import call_command

from budgets.models import Allocation, BudgetNode, Membership, Role
from scheduling.backends.slurm_accounts import (
    MAX_ACCOUNT_LENGTH,
    account_name,
    mirror_accounts,
    parse_associations,
    path_for_account,
)
from scheduling.models import Cluster

from .conftest import SLURM_CONF, slurm_command


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("ai2", "ai2"),
        ("ai2/nlp/olmo", "ai2.nlp.olmo"),
        ("ai2/nlp/olmo-2_big", "ai2.nlp.olmo-2_big"),
    ],
)
def test_a_budget_path_becomes_a_dotted_account_name_and_back(path, name):
    assert account_name(path) == name
    assert path_for_account(name) == path


def test_a_path_too_long_for_slurm_is_cut_and_kept_unique_by_a_hash():
    long_a = "org/" + "a" * 80 + "/x"
    long_b = "org/" + "a" * 80 + "/y"

    names = account_name(long_a), account_name(long_b)

    assert all(len(name) == MAX_ACCOUNT_LENGTH for name in names) and names[0] != names[1]
    assert path_for_account(names[0], {names[0]: long_a}) == long_a


def test_associations_are_read_with_closed_accounts_marked():
    rows = parse_associations("root||||\nlab||root|0\nlab|alice|||\n")

    assert [(row.account, row.user, row.parent, row.closed) for row in rows] == [
        ("lab", "", "root", True),
        ("lab", "alice", "", False),
        ("root", "", "", False),
    ]


def associations() -> dict[tuple[str, str], tuple[str, str]]:
    text = slurm_command(
        "sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,parentname,grpsubmit,fairshare"
    )
    return {(row.account, row.user): (row.parent, row.closed) for row in parse_associations(text)}


@pytest.mark.slurm
@pytest.mark.django_db
def test_the_budget_tree_is_mirrored_and_departed_allocations_are_closed_not_deleted(
    slurm, django_user_model
):
    cluster = Cluster.objects.create(name="s", slug="s", backend_kind="slurm",
                                     backend_settings={"slurm_conf": SLURM_CONF})  # fmt: skip
    root_slug = f"org{uuid.uuid4().hex[:6]}"
    org = BudgetNode.objects.create(name="Org", slug=root_slug, path=root_slug)
    team = BudgetNode.objects.create(name="Team", slug="team", parent=org, path=f"{root_slug}/team")
    for node in (org, team):
        Allocation.objects.create(node=node, cluster=cluster, gpus=Decimal(8))
    Membership.objects.create(
        user=django_user_model.objects.create(username="bob"), node=team, role=Role.MEMBER
    )

    report = mirror_accounts(cluster=cluster)

    team_account = f"{root_slug}.team"
    assert report.created == (root_slug, team_account)
    assert associations()[(team_account, "")] == (root_slug, False)
    assert (team_account, "bob") in associations() and (team_account, "root") in associations()
    assert mirror_accounts(cluster=cluster).created == ()  # a second mirror changes nothing

    team.archived = True
    team.save()
    assert mirror_accounts(cluster=cluster).closed == (team_account,)

    assert associations()[(team_account, "")] == (root_slug, True)
    refused = slurm_command("sbatch", f"--account={team_account}", "--gres=gpu:1", "--output=/dev/null",
                            "--wrap=sleep 1", check=False)  # fmt: skip
    assert refused == ""

    team.archived = False
    team.save()
    assert mirror_accounts(cluster=cluster).reopened == (team_account,)
    assert associations()[(team_account, "")] == (root_slug, False)


def shares_in_sshare() -> dict[str, int]:
    """RawShares of every account, as `sshare` (the users' own tool) prints them."""
    lines = slurm_command("sshare", "-a", "-h", "-P", "-o", "Account,User,RawShares").splitlines()
    rows = (line.split("|") for line in lines)
    return {account.strip(): int(raw) for account, user, raw in rows if not user and raw.isdigit()}


def forget_accounts(names: list[str]) -> None:
    """Remove accounts a previous run left in the (kept) accounting database, deepest first."""
    for depth in sorted({name.count(".") for name in names}, reverse=True):
        level = [name for name in names if name.count(".") == depth]
        slurm_command("sacctmgr", "-i", "delete", "account", ",".join(level), check=False)


@pytest.mark.slurm
@pytest.mark.django_db
def test_the_first_mirror_of_the_demo_tree_is_funded_nodes_only_with_budget_shares_in_a_few_sacctmgr_calls(
    slurm,
):
    call_command("load_demo", verbosity=0)
    cluster = Cluster.objects.order_by("id").first()
    cluster.backend_kind, cluster.backend_settings = (
        "slurm",
        {"slurm_conf": SLURM_CONF, "slurm_users": ["root"]},
    )
    cluster.save()
    leaf = (
        Allocation.objects.filter(cluster=cluster, node__children__isnull=True).order_by("node__path").first()
    )
    leaf.gpus = Decimal(0)  # one team has no budget on this cluster: it gets no account there
    leaf.save()
    funded = dict(Allocation.objects.filter(cluster=cluster, gpus__gt=0).values_list("node__path", "gpus"))
    every_node = [account_name(path) for path in BudgetNode.objects.values_list("path", flat=True)]
    forget_accounts(every_node)

    started = time.perf_counter()
    report = mirror_accounts(cluster=cluster)
    wall_s = time.perf_counter() - started

    print(f"first mirror of the demo tree: {wall_s:.2f} s, {report.sacctmgr_calls} sacctmgr calls, "
          f"{len(report.created)} accounts, {len(report.users_added)} user associations")  # fmt: skip
    assert report.sacctmgr_calls <= 6  # three reads and one load per change set, not a call per account
    assert set(report.created) == {account_name(path) for path in funded}
    assert account_name(leaf.node.path) not in report.created
    shares = shares_in_sshare()
    assert {account_name(path): shares[account_name(path)] for path in funded} == {
        account_name(path): round(gpus * 100) for path, gpus in funded.items()
    }
    assert mirror_accounts(cluster=cluster).created == ()


@pytest.mark.slurm
@pytest.mark.django_db
def test_a_budget_change_moves_the_share_and_a_member_who_left_loses_the_association(
    slurm, django_user_model
):
    cluster = Cluster.objects.create(name="s", slug="s", backend_kind="slurm",
                                     backend_settings={"slurm_conf": SLURM_CONF})  # fmt: skip
    root_slug = f"org{uuid.uuid4().hex[:6]}"
    org = BudgetNode.objects.create(name="Org", slug=root_slug, path=root_slug)
    allocation = Allocation.objects.create(node=org, cluster=cluster, gpus=Decimal(8))
    member = Membership.objects.create(
        user=django_user_model.objects.create(username="carol"), node=org, role=Role.MEMBER
    )
    mirror_accounts(cluster=cluster)
    assert shares_in_sshare()[root_slug] == 800 and (root_slug, "carol") in associations()

    allocation.gpus = Decimal("12.5")
    allocation.save()
    member.delete()
    report = mirror_accounts(cluster=cluster)

    assert report.shares_changed == (root_slug,) and report.users_removed == (f"{root_slug}:carol",)
    assert shares_in_sshare()[root_slug] == 1250
    assert (root_slug, "carol") not in associations() and (root_slug, "root") in associations()
