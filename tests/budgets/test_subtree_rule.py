"""One subtree rule everywhere: ``lab/nlp`` is not above ``lab/nlp-eval``, whoever asks.

Each test names the place that applies the rule; all of them call ``budgets.paths``.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from budgets import delivery, selectors, services, whatif
from budgets.models import BudgetNode, Membership, Role
from budgets.paths import below, in_subtree, subtree_q
from portal import dashboards
from scheduling import reports
from scheduling.models import AllocationHour, Workload, WorkloadState


@pytest.fixture
def nlp(lab) -> SimpleNamespace:  # noqa: ANN001
    nlp = services.node_create(actor=None, parent=lab.org, name="nlp")
    nlp_eval = services.node_create(actor=None, parent=lab.org, name="nlp-eval")
    child = services.node_create(actor=None, parent=nlp, name="parsing")
    return SimpleNamespace(lab=lab, nlp=nlp, nlp_eval=nlp_eval, child=child)


@pytest.mark.parametrize(
    ("path", "root", "inside", "strictly_below"),
    [
        ("lab/nlp", "lab/nlp", True, False),
        ("lab/nlp/parsing", "lab/nlp", True, True),
        ("lab/nlp-eval", "lab/nlp", False, False),
        ("lab/nlpx/a", "lab/nlp", False, False),
        ("lab", "lab/nlp", False, False),
    ],
    ids=["itself", "child", "sibling-with-the-prefix", "cousin-with-the-prefix", "parent"],
)
def test_the_helpers_apply_the_rule(path, root, inside, strictly_below):
    assert (in_subtree(path, root), below(path, root)) == (inside, strictly_below)


def test_the_orm_filter_applies_the_same_rule(nlp):
    paths = set(BudgetNode.objects.filter(subtree_q("lab/nlp")).values_list("path", flat=True))

    assert paths == {"lab/nlp", "lab/nlp/parsing"}


def test_the_queue_filtered_on_lab_nlp_leaves_out_lab_nlp_eval(nlp):
    now = timezone.now()
    for node in (nlp.nlp, nlp.child, nlp.nlp_eval):
        Workload.objects.create(
            cluster=nlp.lab.main, allocation=node, user_name="bob", gpus=1, state=WorkloadState.PENDING,
            state_changed_at=now, submitted_at=now, queued_at=now,
        )  # fmt: skip

    rows = reports.queue_rows(cluster=nlp.lab.main, filters={"allocation": "lab/nlp"})

    assert sorted(w.allocation.path for w in rows) == ["lab/nlp", "lab/nlp/parsing"]


def test_archiving_lab_nlp_leaves_lab_nlp_eval_live(nlp):
    assert services.node_archive(actor=None, node=nlp.nlp) == 2
    assert BudgetNode.objects.get(pk=nlp.nlp_eval.pk).archived is False


def test_renaming_lab_nlp_leaves_the_path_of_lab_nlp_eval(nlp):
    services.node_rename(actor=None, node=nlp.nlp, name="language models")

    assert BudgetNode.objects.get(pk=nlp.nlp_eval.pk).path == "lab/nlp-eval"
    assert BudgetNode.objects.get(pk=nlp.child.pk).path == "lab/language-models/parsing"


def test_lab_nlp_may_move_under_lab_nlp_eval_which_is_not_its_descendant(nlp):
    services.node_move(actor=None, node=nlp.nlp, parent=nlp.nlp_eval)

    assert BudgetNode.objects.get(pk=nlp.child.pk).path == "lab/nlp-eval/nlp/parsing"


def test_the_move_targets_of_lab_nlp_include_lab_nlp_eval(nlp):
    tree = selectors.budget_tree(cluster=nlp.lab.main, user=nlp.lab.oscar)

    targets = {row.node.path for row in selectors.move_targets(tree=tree, node=nlp.nlp)}

    assert "lab/nlp-eval" in targets and "lab/nlp/parsing" not in targets


def test_a_whatif_edit_of_lab_nlp_does_not_mark_lab_nlp_eval_changed(nlp):
    rows = [{"allocation": p, "delivered_owed_ratio": 1.0, "delivered_gpu_hours": 1.0, "owed_gpu_hours": 1.0}
            for p in ("lab/nlp", "lab/nlp/parsing", "lab/nlp-eval")]  # fmt: skip

    compared = whatif.compare_results(rows, rows, current={"lab/nlp": 1.0}, edited={"lab/nlp": 2.0})

    changed = {row["allocation"]: row["changed"] for row in compared["rows"]}
    assert changed == {"lab/nlp": True, "lab/nlp/parsing": True, "lab/nlp-eval": False}


def test_the_delivery_report_of_lab_nlp_leaves_out_lab_nlp_eval(nlp):
    nodes = list(BudgetNode.objects.all())

    assert set(delivery.subtree_ids(nodes, nlp.nlp)) == {nlp.nlp.pk, nlp.child.pk}


def test_the_home_page_allocation_line_of_lab_nlp_leaves_out_lab_nlp_eval(nlp):
    now = timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    for node, delivered in ((nlp.child, 3600.0), (nlp.nlp_eval, 7200.0)):
        AllocationHour.objects.create(
            cluster=nlp.lab.main, allocation=node, hour=hour, delivered_gpu_s=delivered, owed_gpu_s=delivered
        )
    membership = Membership.objects.create(user=nlp.lab.bob, node=nlp.nlp, role=Role.MEMBER)

    lines = dashboards.my_allocations(
        user=nlp.lab.bob, memberships=[membership], clusters=[nlp.lab.main], now=now, days=7
    )

    assert [(line.node.path, line.delivered_gpu_h) for line in lines] == [("lab/nlp", 1.0)]
