"""A small lab on a simulated cluster for the live-scheduler tests.

    lab (32 GPUs on main)          alice   manager of vision
    +- vision (16)                 bob     member of perception (a researcher)
    |  +- perception (8)           charlie viewer of lab
    +- language (16)               dave    member of language
    +- sandbox (0: unfunded)       oscar   staff (on-call)

Cluster "main": simulated, 4 nodes x 8 A100 in two racks; min-runtime cap 8 h; the rules of
issue 17 as a new cluster has them (GOODPUT).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model

from budgets.models import Allocation, BudgetNode, Membership, Role
from scheduling.models import Cluster, Node
from scheduling.pass_cache import PassMemory

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _node(name: str, parent: BudgetNode | None = None) -> BudgetNode:
    path = f"{parent.path}/{name}" if parent else name
    return BudgetNode.objects.create(name=name.title(), slug=name, parent=parent, path=path)


def build_lab() -> SimpleNamespace:
    users = get_user_model().objects
    main = Cluster.objects.create(name="main", slug="main", gpu_type="A100")
    for index in range(4):
        Node.objects.create(
            cluster=main, name=f"n{index}", gpus=8, gpu_type="A100", topology_domain=f"rack{index // 2}"
        )
    org = _node("lab")
    vision = _node("vision", org)
    perception = _node("perception", vision)
    language = _node("language", org)
    sandbox = _node("sandbox", org)
    for node, gpus in [(org, 32), (vision, 16), (perception, 8), (language, 16), (sandbox, 0)]:
        Allocation.objects.create(node=node, cluster=main, gpus=Decimal(gpus))
    people = SimpleNamespace(
        alice=users.create_user("alice", password="pw"),
        bob=users.create_user("bob", password="pw"),
        charlie=users.create_user("charlie", password="pw"),
        dave=users.create_user("dave", password="pw"),
        oscar=users.create_user("oscar", password="pw", is_staff=True),
    )
    Membership.objects.create(user=people.alice, node=vision, role=Role.MANAGER)
    Membership.objects.create(user=people.bob, node=perception, role=Role.MEMBER)
    Membership.objects.create(user=people.charlie, node=org, role=Role.VIEWER)
    Membership.objects.create(user=people.dave, node=language, role=Role.MEMBER)
    Membership.objects.create(user=people.dave, node=sandbox, role=Role.MEMBER)
    return SimpleNamespace(
        main=main,
        org=org,
        vision=vision,
        perception=perception,
        language=language,
        sandbox=sandbox,
        memory=PassMemory(),  # what this lab's passes remember between them, as a worker's do
        **vars(people),
    )


@pytest.fixture(autouse=True)
def fast_passwords(settings) -> None:  # noqa: ANN001
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def lab(db) -> SimpleNamespace:  # noqa: ANN001
    return build_lab()
