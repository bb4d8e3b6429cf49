"""A small lab for the budget tests.

    lab (org)                       alice   manager of vision   -> edits perception, generation, detection
    +- vision (program)             bob     member of perception (a researcher)
    |  +- perception (team)         charlie viewer of lab
    |  |  +- detection (project)    oscar   staff (on-call)
    |  +- generation (team)         ada     superuser
    +- language (program)           nobody  no membership

Cluster "main": 4 nodes x 8 GPUs, one unhealthy -> 24 healthy GPUs. Cluster "small": 2 x 4.
"""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model

from budgets.models import Allocation, BudgetNode, Membership, Role
from scheduling.models import Cluster, Node


def _node(name: str, parent: BudgetNode | None = None) -> BudgetNode:
    slug = name.lower()
    path = f"{parent.path}/{slug}" if parent else slug
    return BudgetNode.objects.create(name=name.title(), slug=slug, parent=parent, path=path)


@pytest.fixture
def lab(db) -> SimpleNamespace:  # noqa: ANN001
    users = get_user_model().objects
    main = Cluster.objects.create(name="main", slug="main", gpu_type="A100")
    small = Cluster.objects.create(name="small", slug="small", gpu_type="H100")
    for index in range(4):
        Node.objects.create(cluster=main, name=f"n{index}", gpus=8, gpu_type="A100", healthy=index != 3)
    for index in range(2):
        Node.objects.create(cluster=small, name=f"s{index}", gpus=4, gpu_type="H100")
    org = _node("lab")
    vision = _node("vision", org)
    perception = _node("perception", vision)
    generation = _node("generation", vision)
    detection = _node("detection", perception)
    language = _node("language", org)
    for node, gpus in [
        (org, 20),
        (vision, 12),
        (perception, 8),
        (generation, 6),
        (detection, 4),
        (language, 6),
    ]:
        Allocation.objects.create(node=node, cluster=main, gpus=Decimal(gpus))
    people = SimpleNamespace(
        alice=users.create_user("alice", password="pw"),
        bob=users.create_user("bob", password="pw"),
        charlie=users.create_user("charlie", password="pw"),
        oscar=users.create_user("oscar", password="pw", is_staff=True),
        ada=users.create_superuser("ada", password="pw"),
        nobody=users.create_user("nobody", password="pw"),
    )
    Membership.objects.create(user=people.alice, node=vision, role=Role.MANAGER)
    Membership.objects.create(user=people.bob, node=perception, role=Role.MEMBER)
    Membership.objects.create(user=people.charlie, node=org, role=Role.VIEWER)
    return SimpleNamespace(
        main=main, small=small, org=org, vision=vision, perception=perception, generation=generation,
        detection=detection, language=language, **vars(people),
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _fast_passwords(settings) -> None:  # noqa: ANN001
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
