"""Concurrent edits of the budget tree: they apply one after the other and every path stays true.

A rename of an ancestor racing a move of one of its descendants used to leave the moved node with
its old path (so the old program's manager kept editing it) or end in ``deadlock detected`` as a
500. These tests run real transactions in parallel threads on PostgreSQL.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest
from django.db import connection
from rest_framework.test import APIClient

from budgets.models import BudgetNode
from budgets.paths import path_inconsistencies

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "connection.vendor != 'postgresql'",
        reason="row locks and parallel writers need PostgreSQL (SQLite runs one writer at a time)",
    ),
]


def _in_parallel(*calls: Callable[[], int]) -> list[int]:
    """Run the calls at the same moment in threads, each on its own connection; their status codes."""
    barrier = threading.Barrier(len(calls))
    statuses: list[int] = []

    def run(call: Callable[[], int]) -> None:
        try:
            barrier.wait()
            statuses.append(call())
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


def _staff_client(lab) -> APIClient:  # noqa: ANN001
    client = APIClient(raise_request_exception=False)  # a crash must show as the 500 a caller gets
    client.force_authenticate(lab.oscar)
    return client


def _patch(client: APIClient, node: BudgetNode, body: dict) -> Callable[[], int]:
    return lambda: client.patch(f"/api/v1/budget-nodes/{node.pk}/", body, format="json").status_code


def test_renaming_an_ancestor_while_a_descendant_moves_never_leaves_a_stale_path_or_a_500(lab):
    client = _staff_client(lab)
    homes = [lab.language, lab.vision]
    for round_number in range(12):
        statuses = _in_parallel(
            _patch(client, lab.vision, {"name": f"Vision {round_number}"}),
            _patch(client, lab.perception, {"parent": homes[round_number % 2].pk}),
        )

        assert 500 not in statuses and set(statuses) <= {200, 409}, (round_number, statuses)
        assert path_inconsistencies() == [], round_number
    moved = BudgetNode.objects.get(pk=lab.perception.pk)
    assert moved.parent_id == lab.vision.pk and moved.path == "lab/vision-11/perception"
    assert BudgetNode.objects.get(pk=lab.detection.pk).path == "lab/vision-11/perception/detection"


def test_random_concurrent_renames_moves_and_creations_keep_every_path_equal_to_parent_path_and_slug(lab):
    client = _staff_client(lab)
    chance = random.Random(19)
    nodes = [lab.vision, lab.perception, lab.generation, lab.detection, lab.language]

    def random_edit(index: int) -> Callable[[], int]:
        node = chance.choice(nodes)
        kind = chance.choice(["rename", "move", "child"])
        if kind == "rename":
            return _patch(client, node, {"name": f"{node.slug.split('-')[0]} {index}"})
        if kind == "move":
            return _patch(client, node, {"parent": chance.choice([lab.org, *nodes]).pk})
        body = {"parent": node.pk, "name": f"child {index}"}
        return lambda: client.post("/api/v1/budget-nodes/", body, format="json").status_code

    for round_number in range(10):
        statuses = _in_parallel(*(random_edit(round_number * 10 + i) for i in range(3)))

        assert 500 not in statuses, (round_number, statuses)
        assert path_inconsistencies() == [], round_number


def test_the_consistency_check_names_a_node_whose_path_is_stale(lab):
    BudgetNode.objects.filter(pk=lab.detection.pk).update(path="lab/language/detection")

    assert path_inconsistencies() == [("lab/language/detection", "lab/vision/perception/detection")]


@pytest.mark.parametrize(
    ("url", "sqlstate"),
    [("/api/v1/budget-nodes/{pk}/", "40P01"), ("/budgets/main/nodes/{pk}/rename/", "55P03")],
    ids=["api-deadlock", "page-lock-timeout"],
)
def test_an_edit_that_loses_a_database_race_gets_409_with_a_message_not_500(lab, monkeypatch, url, sqlstate):
    from django.db import OperationalError

    from budgets import services

    class Refused(Exception):
        pass

    def lose_the_race(**kwargs: object) -> None:
        cause = Refused("deadlock detected")
        cause.sqlstate = sqlstate  # type: ignore[attr-defined]
        raise OperationalError("deadlock detected") from cause

    monkeypatch.setattr(services, "node_rename", lose_the_race)
    client = _staff_client(lab)
    client.force_login(lab.oscar)

    if url.startswith("/api/"):
        response = client.patch(url.format(pk=lab.perception.pk), {"name": "X"}, format="json")
    else:
        response = client.post(url.format(pk=lab.perception.pk), {"name": "X"})

    assert response.status_code == 409
    assert "Try again" in response.content.decode()
