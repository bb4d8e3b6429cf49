"""The demo organisation: its shape, its budgets' headroom, its logins, and that a re-run changes nothing."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.http import HttpRequest

from budgets import selectors
from budgets.models import Allocation, BudgetChange, BudgetNode, Membership, Role
from scheduling.models import Cluster

pytestmark = pytest.mark.django_db


def _load() -> str:
    out = StringIO()
    call_command("load_demo", stdout=out)
    return out.getvalue()


@pytest.fixture
def demo() -> str:
    return _load()


def test_it_builds_one_org_four_programs_fifteen_teams_and_about_forty_projects(demo):
    depths = [node.path.count("/") for node in BudgetNode.objects.all()]

    assert [depths.count(depth) for depth in range(4)] == [1, 4, 15, 38]
    assert BudgetNode.objects.filter(path="lumen-lab/language/post-training/preference-learning").exists()


def test_it_creates_the_two_clusters(demo):
    main, h100 = selectors.cluster_list()

    assert (main.slug, main.node_count, main.installed_gpus, main.gpu_type) == ("main", 125, 1000, "A100")
    assert (h100.slug, h100.node_count, h100.installed_gpus, h100.gpu_type) == ("h100", 16, 64, "H100")
    assert main.nodes.values("topology_domain").distinct().count() == 8  # islands of 16 nodes


@pytest.mark.parametrize("slug", ["main", "h100"])
def test_budgets_leave_fifteen_to_twenty_percent_of_each_cluster_unallocated(demo, slug):
    tree = selectors.budget_tree(
        cluster=Cluster.objects.get(slug=slug), user=get_user_model().objects.get(username="admin")
    )

    assert 0.15 <= tree.unallocated_gpus / tree.healthy_gpus <= 0.20
    assert not tree.overcommitted


def test_researchers_have_memberships(demo):
    researchers = get_user_model().objects.filter(username__contains=".")

    assert researchers.count() == 150
    assert Membership.objects.filter(user__in=researchers).count() == 150
    assert (
        Membership.objects.filter(
            user__in=researchers, role=Role.MANAGER, node__path__regex=r"^[^/]+/[^/]+/[^/]+$"
        ).count()
        == 15
    )


def test_it_prints_a_working_login_for_each_persona(demo):
    for username in ("manager", "researcher", "oncall", "admin"):
        assert f"{username:<11} / demo" in demo
        assert (
            authenticate(HttpRequest(), username=username, password="demo") is not None
        )  # axes wants a request
    oncall = get_user_model().objects.get(username="oncall")
    assert oncall.is_staff and not oncall.is_superuser


def test_the_manager_manages_a_program_and_the_researcher_belongs_to_a_team(demo):
    assert Membership.objects.get(user__username="manager").node.path == "lumen-lab/language"
    assert Membership.objects.get(user__username="researcher").node.path == "lumen-lab/language/pretraining"


def test_a_second_run_changes_nothing_and_keeps_edited_budgets(demo):
    allocation = Allocation.objects.get(node__path="lumen-lab/language/pretraining", cluster__slug="main")
    allocation.gpus = 5
    allocation.save()
    counts = [model.objects.count() for model in (BudgetNode, Allocation, BudgetChange, Membership)]

    second = _load()

    assert re.findall(r"\((\d+) new\)", second) == ["0"] * 6
    assert [model.objects.count() for model in (BudgetNode, Allocation, BudgetChange, Membership)] == counts
    assert Allocation.objects.get(pk=allocation.pk).gpus == 5
