"""Writes to the budget tree: rules, subtree paths, and history for real changes only."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from budgets import services
from budgets.models import Allocation, BudgetChange, BudgetNode


def _changes(node: BudgetNode) -> list[tuple[str, str, str]]:
    return list(
        BudgetChange.objects.filter(node=node).order_by("id").values_list("field", "old_value", "new_value")
    )


def test_creating_a_node_records_its_creation(lab):
    node = services.node_create(actor=lab.alice, parent=lab.vision, name="Video  Models")

    assert (node.name, node.path) == ("Video Models", "lab/vision/video-models")
    assert _changes(node) == [("created", "", "lab/vision/video-models")]
    assert BudgetChange.objects.get(node=node).actor == lab.alice


@pytest.mark.parametrize("name", ["Perception", "perception", " PERCEPTION "])
def test_it_refuses_a_duplicate_name_among_siblings(lab, name):
    with pytest.raises(ValidationError) as caught:
        services.node_create(actor=lab.alice, parent=lab.vision, name=name)

    assert "already exists under Vision" in caught.value.message_dict["name"][0]
    assert BudgetNode.objects.filter(parent=lab.vision).count() == 2
    assert not BudgetChange.objects.exists()


def test_the_same_name_is_fine_under_another_parent(lab):
    node = services.node_create(actor=lab.ada, parent=lab.language, name="Perception")

    assert node.path == "lab/language/perception"


@pytest.mark.parametrize("name", ["", "   ", "!!!", "x" * 101])
def test_it_refuses_an_unusable_name(lab, name):
    with pytest.raises(ValidationError) as caught:
        services.node_create(actor=lab.alice, parent=lab.vision, name=name)

    assert "name" in caught.value.message_dict


def test_renaming_rewrites_the_path_of_the_whole_subtree(lab):
    services.node_rename(actor=lab.alice, node=lab.perception, name="Sight")

    paths = set(BudgetNode.objects.filter(path__startswith="lab/vision/").values_list("path", flat=True))
    assert paths == {"lab/vision/sight", "lab/vision/sight/detection", "lab/vision/generation"}
    assert _changes(lab.perception) == [("name", "Perception", "Sight")]


def test_renaming_to_the_same_name_writes_no_history(lab):
    services.node_rename(actor=lab.alice, node=lab.perception, name="Perception")

    assert not BudgetChange.objects.exists()


def test_renaming_onto_a_sibling_name_is_refused_and_changes_nothing(lab):
    with pytest.raises(ValidationError):
        services.node_rename(actor=lab.alice, node=lab.perception, name="Generation")

    lab.perception.refresh_from_db()
    assert (lab.perception.name, lab.perception.path) == ("Perception", "lab/vision/perception")
    assert not BudgetChange.objects.exists()


def test_moving_a_node_moves_its_subtree_and_records_the_old_and_new_parent(lab):
    services.node_move(actor=lab.ada, node=lab.perception, parent=lab.language)

    assert BudgetNode.objects.get(pk=lab.detection.pk).path == "lab/language/perception/detection"
    assert _changes(lab.perception) == [("parent", "lab/vision", "lab/language")]


@pytest.mark.parametrize("target", ["perception", "detection"])
def test_a_node_cannot_move_under_itself_or_a_descendant(lab, target):
    with pytest.raises(ValidationError) as caught:
        services.node_move(actor=lab.ada, node=lab.perception, parent=getattr(lab, target))

    assert "descendants" in caught.value.message_dict["parent"][0]
    assert BudgetNode.objects.get(pk=lab.perception.pk).parent_id == lab.vision.pk
    assert not BudgetChange.objects.exists()


def test_moving_under_the_current_parent_writes_no_history(lab):
    services.node_move(actor=lab.ada, node=lab.perception, parent=lab.vision)

    assert not BudgetChange.objects.exists()


def test_moving_next_to_a_sibling_of_the_same_name_is_refused(lab):
    services.node_create(actor=lab.ada, parent=lab.language, name="Perception")

    with pytest.raises(ValidationError) as caught:
        services.node_move(actor=lab.ada, node=lab.perception, parent=lab.language)

    assert "already exists" in caught.value.message_dict["name"][0]
    assert BudgetNode.objects.get(pk=lab.perception.pk).path == "lab/vision/perception"


def test_archiving_archives_the_live_subtree_once(lab):
    assert services.node_archive(actor=lab.alice, node=lab.perception, reason="team ended") == 2
    assert services.node_archive(actor=lab.alice, node=lab.perception) == 0

    assert set(BudgetNode.objects.filter(archived=True).values_list("slug", flat=True)) == {
        "perception",
        "detection",
    }
    assert BudgetChange.objects.filter(field="archived").count() == 2


def test_archiving_defunds_the_subtree_and_records_each_drop(lab):
    services.node_archive(actor=lab.alice, node=lab.perception, reason="team ended")

    assert set(Allocation.objects.filter(node__archived=True).values_list("gpus", flat=True)) == {Decimal(0)}
    drops = BudgetChange.objects.filter(field="gpus").order_by("id")
    assert list(drops.values_list("node__slug", "old_value", "new_value", "reason")) == [
        ("perception", "8.00", "0.00", "archived: team ended"),
        ("detection", "4.00", "0.00", "archived: team ended"),
    ]
    assert Allocation.objects.get(node=lab.vision, cluster=lab.main).gpus == 12


def test_setting_an_allocation_records_old_new_cluster_and_reason(lab):
    services.allocation_set(
        actor=lab.alice, node=lab.perception, cluster=lab.main, gpus="10.5", reason="new run"
    )

    change = BudgetChange.objects.get()
    assert (change.field, change.old_value, change.new_value) == ("gpus", "8.00", "10.50")
    assert (change.cluster, change.reason, change.actor) == (lab.main, "new run", lab.alice)


def test_setting_an_allocation_to_its_current_value_writes_no_history(lab):
    services.allocation_set(actor=lab.alice, node=lab.perception, cluster=lab.main, gpus="8.0", reason="same")

    assert not BudgetChange.objects.exists()


def test_a_first_allocation_on_another_cluster_starts_from_zero(lab):
    services.allocation_set(
        actor=lab.alice, node=lab.perception, cluster=lab.small, gpus=4, reason="h100 time"
    )

    assert Allocation.objects.get(node=lab.perception, cluster=lab.small).gpus == Decimal(4)
    assert BudgetChange.objects.get().old_value == "0.00"


@pytest.mark.parametrize(
    ("gpus", "reason", "fields"),
    [
        ("-1", "why", {"gpus"}),
        ("abc", "why", {"gpus"}),
        ("", "why", {"gpus"}),
        ("NaN", "why", {"gpus"}),
        ("1.234", "why", {"gpus"}),
        ("1e12", "why", {"gpus"}),
        ("5", "", {"reason"}),
        ("5", "   ", {"reason"}),
        ("-5", "", {"gpus", "reason"}),
    ],
    ids=[
        "negative",
        "not-a-number",
        "empty",
        "nan",
        "three-decimals",
        "too-large",
        "no-reason",
        "blank-reason",
        "both",
    ],
)
def test_bad_allocation_input_is_refused_field_by_field_and_changes_nothing(lab, gpus, reason, fields):
    with pytest.raises(ValidationError) as caught:
        services.allocation_set(
            actor=lab.alice, node=lab.perception, cluster=lab.main, gpus=gpus, reason=reason
        )

    assert set(caught.value.message_dict) == fields
    assert Allocation.objects.get(node=lab.perception, cluster=lab.main).gpus == Decimal(8)
    assert not BudgetChange.objects.exists()
