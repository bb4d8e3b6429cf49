"""Budget paths as Slurm account names, and the sacctmgr mirror of the budget tree."""

from __future__ import annotations

import uuid

import pytest

from budgets.models import BudgetNode, Membership, Role
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
    text = slurm_command("sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,parentname,grpsubmit")
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
