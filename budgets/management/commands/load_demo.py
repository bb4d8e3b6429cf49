"""Load the demo organisation (idempotent: a second run changes nothing and says so).

Nodes are found by path and created through the services (so their creation is in the history);
allocations are only set where none exists, so budgets edited in the demo survive a re-run.
"""

from __future__ import annotations

from decimal import Decimal
from itertools import cycle
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User as AuthUser
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils.text import slugify

from budgets import demo, services
from budgets.models import Allocation, BudgetNode, Membership, Role
from scheduling.models import Cluster, Node

User = get_user_model()


class Command(BaseCommand):
    help = "Load the demo organisation, clusters, budgets, researchers and persona logins."

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            clusters = self._clusters()
            tree = self._tree()
            self._allocations(clusters, tree)
            self._people(tree)
        self._print_logins()

    # 1. Clusters and their nodes --------------------------------------------------------------
    def _clusters(self) -> dict[str, Cluster]:
        clusters = {}
        for slug, name, gpu_type, count, gpus, per_domain in demo.CLUSTERS:
            cluster, _ = Cluster.objects.get_or_create(
                slug=slug, defaults={"name": name, "gpu_type": gpu_type}
            )
            existing = set(cluster.nodes.values_list("name", flat=True))
            missing = [
                Node(cluster=cluster, name=f"{slug}-n{i:03d}", gpus=gpus, gpu_type=gpu_type,
                     topology_domain=f"{slug}-ib{i // per_domain + 1:02d}")
                for i in range(count)
                if f"{slug}-n{i:03d}" not in existing
            ]  # fmt: skip
            Node.objects.bulk_create(missing)
            self._say(f"cluster {slug}: {count} nodes x {gpus} {gpu_type} ({len(missing)} new)")
            clusters[slug] = cluster
        return clusters

    # 2. The budget tree -----------------------------------------------------------------------
    def _tree(self) -> dict[tuple[str, ...], BudgetNode]:
        """(program, team, project) name tuples -> nodes; the org is the empty tuple."""
        created = 0
        nodes: dict[tuple[str, ...], BudgetNode] = {}

        def ensure(key: tuple[str, ...], name: str, parent: BudgetNode | None) -> None:
            nonlocal created
            path = (parent.path + "/" if parent else "") + slugify(name)
            node = BudgetNode.objects.filter(path=path).first()
            if node is None:
                node = services.node_create(actor=None, parent=parent, name=name)
                created += 1
            nodes[key] = node

        ensure((), demo.ORG, None)
        for program, teams in demo.TREE.items():
            ensure((program,), program, nodes[()])
            for team, projects in teams.items():
                ensure((program, team), team, nodes[(program,)])
                for project in projects:
                    ensure((program, team, project), project, nodes[(program, team)])
        self._say(f"budget tree: {len(nodes)} nodes under {nodes[()].path}/ ({created} new)")
        return nodes

    # 3. Allocations ---------------------------------------------------------------------------
    def _allocations(self, clusters: dict[str, Cluster], tree: dict[tuple[str, ...], BudgetNode]) -> None:
        for slug, cluster in clusters.items():
            budgets = demo_budgets(slug)
            have = set(Allocation.objects.filter(cluster=cluster).values_list("node_id", flat=True))
            new = 0
            for key, gpus in budgets.items():
                if tree[key].pk not in have:
                    services.allocation_set(
                        actor=None, node=tree[key], cluster=cluster, gpus=Decimal(gpus), reason="Demo budget"
                    )
                    new += 1
            self._say(f"allocations on {slug}: {len(budgets)} budgets, org {budgets[()]} GPUs ({new} new)")

    # 4. Researchers, memberships and personas ---------------------------------------------------
    def _people(self, tree: dict[tuple[str, ...], BudgetNode]) -> None:
        researchers = self._researchers()
        teams = [key for key in tree if len(key) == 2]
        projects = cycle(sorted(key for key in tree if len(key) == 3))
        wanted: list[tuple[AuthUser, BudgetNode, str]] = []
        for index, user in enumerate(researchers):
            if index < len(teams):  # the first researcher of each team leads it
                wanted.append((user, tree[teams[index]], Role.MANAGER))
            else:
                wanted.append((user, tree[next(projects)], Role.MEMBER))
        personas = self._personas()
        wanted += [
            (personas["manager"], tree[("Language",)], Role.MANAGER),
            (personas["researcher"], tree[("Language", "Pretraining")], Role.MEMBER),
        ]
        created = sum(_ensure_membership(user, node, role) for user, node, role in wanted)
        self._say(
            f"people: {len(researchers)} researchers, {len(personas)} personas, {len(wanted)} memberships ({created} new)"
        )

    def _researchers(self) -> list:
        names = [f"{first}.{last}" for last in demo.LAST_NAMES for first in demo.FIRST_NAMES]
        names = sorted(names[: demo.RESEARCHER_COUNT])
        existing = set(User.objects.filter(username__in=names).values_list("username", flat=True))
        fresh = []
        for name in names:
            if name not in existing:
                first, last = name.split(".")
                user = User(username=name, first_name=first.title(), last_name=last.title())
                user.set_unusable_password()  # researchers exist for memberships; personas log in
                fresh.append(user)
        User.objects.bulk_create(fresh)
        return list(User.objects.filter(username__in=names).order_by("username"))

    def _personas(self) -> dict[str, AuthUser]:
        personas: dict[str, AuthUser] = {}
        for username, full_name, _, flags in demo.PERSONAS:
            first, last = full_name.split(" ", 1)
            user, _ = User.objects.update_or_create(
                username=username,
                # an address, so `make demo` prints the personas' notification e-mails (console backend)
                defaults={
                    "first_name": first,
                    "last_name": last,
                    "email": f"{username}@lumen-lab.example",
                    **flags,
                },
            )
            user.set_password(demo.PASSWORD)
            user.save(update_fields=["password"])
            personas[username] = user
        return personas

    def _print_logins(self) -> None:
        self.stdout.write(self.style.SUCCESS("Demo logins (username / password):"))
        for username, _, what, _ in demo.PERSONAS:
            self.stdout.write(f"  {username:<11} / {demo.PASSWORD:<6}  {what}")

    def _say(self, message: str) -> None:
        self.stdout.write(f"  {message}")


def _ensure_membership(user: AuthUser, node: BudgetNode, role: str) -> bool:
    _, created = Membership.objects.get_or_create(user=user, node=node, defaults={"role": role})
    return created


def demo_budgets(cluster_slug: str) -> dict[tuple[str, ...], int]:
    """Whole-GPU budgets per node key on one cluster: programs by share, then teams and projects."""
    org_gpus = demo.ORG_BUDGETS[cluster_slug]
    budgets: dict[tuple[str, ...], int] = {(): org_gpus}
    for program, teams in demo.TREE.items():
        program_gpus = round(org_gpus * demo.PROGRAM_SHARES[program])
        budgets[(program,)] = program_gpus
        funded = {team: projects for team, projects in teams.items() if _funds(cluster_slug, team)}
        weight = sum(len(projects) for projects in funded.values())
        for team, projects in funded.items():
            team_gpus = int(program_gpus * demo.TEAM_FILL * len(projects) / weight)
            budgets[(program, team)] = team_gpus
            fill = demo.OVERCOMMITTED.get((cluster_slug, program, team), demo.PROJECT_FILL)
            for project in projects:
                budgets[(program, team, project)] = int(team_gpus * fill / len(projects))
    return budgets


def _funds(cluster_slug: str, team: str) -> bool:
    return cluster_slug != "h100" or team in demo.H100_TEAMS
