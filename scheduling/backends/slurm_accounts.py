"""Budget paths as Slurm account names, and the sacctmgr mirror of the budget tree.

Mapping (deterministic, unique, reversible): the slug path with "/" replaced by "." —
``ai2/nlp/olmo`` is the Slurm account ``ai2.nlp.olmo``. Slugs never contain ".", so the mapping is
one-to-one, and Slurm's lower-case account names keep slugs intact. A name longer than
``MAX_ACCOUNT_LENGTH`` is cut and ends in "-" plus the first 8 hex digits of the path's SHA-1; the
full path is then read back from the account's Description, which the mirror always sets to the path.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, SupportsFloat

if TYPE_CHECKING:
    from scheduling.models import Cluster

    from .slurm import SlurmCli, SlurmSettings

logger = logging.getLogger(__name__)
MAX_ACCOUNT_LENGTH = 63  # also a Kubernetes label value (<= 63 characters)
PORTAL_ORGANIZATION = "portal"  # sacctmgr Organization of every account the mirror manages
_HASHED = re.compile(r"-[0-9a-f]{8}$")


def account_name(path: str) -> str:
    """The Slurm account for a budget path: "ai2/nlp/olmo" -> "ai2.nlp.olmo"."""
    name = path.strip("/").replace("/", ".").lower()
    if len(name) <= MAX_ACCOUNT_LENGTH:
        return name
    digest = hashlib.sha1(path.encode()).hexdigest()[:8]
    return f"{name[: MAX_ACCOUNT_LENGTH - 9]}-{digest}"


def is_shortened(name: str) -> bool:
    return len(name) == MAX_ACCOUNT_LENGTH and bool(_HASHED.search(name))


def path_for_account(name: str, descriptions: dict[str, str] | None = None) -> str:
    """The budget path of a Slurm account; shortened names are looked up in ``descriptions``."""
    if is_shortened(name) and descriptions and name in descriptions:
        return descriptions[name]
    return name.replace(".", "/")


@dataclass(frozen=True, slots=True)
class SlurmAssociation:
    """One row of `sacctmgr show assoc`: an account's own row has user ""."""

    account: str
    user: str
    parent: str
    closed: bool  # GrpSubmitJobs=0: no new job may be submitted or started under it
    shares: str = ""  # Fairshare (RawShares), as sacctmgr prints it


@dataclass(frozen=True, slots=True)
class WantedAccount:
    name: str
    path: str
    parent: str  # the nearest funded ancestor's account name; "root" for the top
    users: tuple[str, ...]
    shares: int = 1  # Fairshare=: the allocation's GPUs x SHARES_PER_GPU


@dataclass(frozen=True, slots=True)
class MirrorReport:
    created: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()
    reopened: tuple[str, ...] = ()
    closed: tuple[str, ...] = ()
    users_added: tuple[str, ...] = ()  # "account:user"
    users_removed: tuple[str, ...] = ()  # "account:user"
    shares_changed: tuple[str, ...] = ()
    sacctmgr_calls: int = 0
    seconds: float = 0.0


SHARES_PER_GPU = 100  # RawShares per allocated GPU (budgets have two decimals)
ASSOC_FORMAT = "format=account,user,parentname,grpsubmit,fairshare"


def parse_associations(text: str) -> tuple[SlurmAssociation, ...]:
    """`sacctmgr -n -P show assoc format=account,user,parentname,grpsubmit[,fairshare]` into rows."""
    rows = []
    for line in text.splitlines():
        account, user, parent, grp_submit, shares = (line.split("|") + ["", "", "", "", ""])[:5]
        rows.append(SlurmAssociation(account, user, parent, grp_submit.strip() == "0", shares.strip()))
    return tuple(sorted(rows, key=lambda row: (row.account, row.user)))


def parse_portal_accounts(text: str) -> frozenset[str]:
    """Names of accounts the mirror manages, from `show account format=account,organization`."""
    pairs = (line.split("|") for line in text.splitlines() if "|" in line)
    return frozenset(name for name, organization, *_ in pairs if organization == PORTAL_ORGANIZATION)


def shares_for(gpus: SupportsFloat) -> int:
    """Fairshare= for an allocation of ``gpus`` GPUs (at least 1: Slurm's 0 means "no share")."""
    return max(1, round(float(gpus) * SHARES_PER_GPU))


def wanted_accounts(*, cluster: Cluster) -> tuple[WantedAccount, ...]:
    """Every live budget node funded on this cluster (an allocation > 0) as an account, parents
    first, under its nearest funded ancestor; users: the node's members plus the cluster's
    ``backend_settings["slurm_users"]`` (default ["root"], so the portal itself may submit)."""
    from budgets.models import Allocation, BudgetNode, Membership

    extra_users = tuple((cluster.backend_settings or {}).get("slurm_users", ["root"]))
    funded = dict(
        Allocation.objects.filter(cluster=cluster, gpus__gt=0, node__archived=False).values_list(
            "node_id", "gpus"
        )
    )
    members: dict[int, set[str]] = {}
    for node_id, username in Membership.objects.filter(node_id__in=list(funded)).values_list(
        "node_id", "user__username"
    ):
        members.setdefault(node_id, set()).add(username)
    nodes = {
        node.id: node for node in BudgetNode.objects.filter(archived=False).only("id", "path", "parent_id")
    }
    wanted = []
    for node_id in funded:
        node = nodes.get(node_id)
        if node is None:
            continue
        parent = nodes.get(node.parent_id) if node.parent_id is not None else None
        while parent is not None and parent.id not in funded:
            parent = nodes.get(parent.parent_id) if parent.parent_id is not None else None
        wanted.append(
            WantedAccount(
                name=account_name(node.path),
                path=node.path,
                parent=account_name(parent.path) if parent is not None else "root",
                users=tuple(sorted(set(extra_users) | members.get(node_id, set()))),
                shares=shares_for(funded[node_id]),
            )
        )
    return tuple(sorted(wanted, key=lambda account: (account.path.count("/"), account.path)))


def accounts_digest(wanted: tuple[WantedAccount, ...]) -> str:
    """SHA-256 of the wanted account tree: equal digests, nothing to mirror."""
    text = "\n".join(f"{a.name}|{a.parent}|{a.path}|{a.shares}|{','.join(a.users)}" for a in wanted)
    return hashlib.sha256(text.encode()).hexdigest()


def slurm_accounts_sync(*, cluster: Cluster, cli: SlurmCli | None = None) -> MirrorReport | None:
    """Mirror the budget tree into Slurm when it changed since the last mirror; None when unchanged.

    Run by its own Celery task (``scheduling.mirror_slurm_accounts``), never inside a pass; it costs
    a few queries when nothing changed. The digest is stored only after a mirror succeeds: a
    failed one is tried again by the next run.
    """
    from scheduling.models import PassLease

    wanted = wanted_accounts(cluster=cluster)
    digest = accounts_digest(wanted)
    lease, _ = PassLease.objects.get_or_create(cluster_id=cluster.pk)
    if lease.accounts_digest == digest:
        return None
    report = mirror_accounts(cluster=cluster, cli=cli, wanted=wanted)
    PassLease.objects.filter(pk=cluster.pk).update(accounts_digest=digest)
    return report


class CountingCli:
    """Counts the sacctmgr calls of one mirror (its report says how many it made)."""

    def __init__(self, cli: SlurmCli) -> None:
        self.cli, self.calls = cli, 0

    def run(self, *args: str) -> str:
        self.calls += 1
        return self.cli.run(*args)


def mirror_accounts(
    *, cluster: Cluster, cli: SlurmCli | None = None, wanted: tuple[WantedAccount, ...] | None = None
) -> MirrorReport:
    """Make Slurm's account tree match the funded budget tree, batched: three reads, then one
    `sacctmgr load` of a file for every new account, share and user association, one call per
    re-parented account, one to reopen, one to close (GrpSubmitJobs=0 GrpJobs=0, never deleted:
    accounting keeps its history) and one per departed user (their associations removed)."""
    from .slurm import SlurmCli, SlurmSettings

    started = time.perf_counter()
    counting = CountingCli(
        cli or SlurmCli(mirror_settings(SlurmSettings.from_mapping(cluster.backend_settings or {})))
    )
    wanted = wanted if wanted is not None else wanted_accounts(cluster=cluster)
    current = parse_associations(counting.run("sacctmgr", "-n", "-P", "show", "assoc", ASSOC_FORMAT))
    ours = parse_portal_accounts(
        counting.run("sacctmgr", "-n", "-P", "show", "account", "format=account,organization")
    )
    known_users = set(counting.run("sacctmgr", "-n", "-P", "show", "user", "format=user").split())
    plan = mirror_plan(wanted, current, ours)
    if plan.load:
        _apply_plan(plan, counting, cluster_name=_cluster_name(cluster, counting), known_users=known_users)
    else:
        _apply_plan(plan, counting, cluster_name="", known_users=known_users)
    return MirrorReport(
        created=plan.created, moved=tuple(name for name, _ in plan.moved), reopened=plan.reopened,
        closed=plan.closed, users_added=tuple(f"{a}:{u}" for a, u in plan.users_added),
        users_removed=tuple(f"{a}:{u}" for a, u in plan.users_removed),
        shares_changed=tuple(name for name, _ in plan.shares), sacctmgr_calls=counting.calls,
        seconds=round(time.perf_counter() - started, 3),
    )  # fmt: skip


def mirror_settings(settings: SlurmSettings) -> SlurmSettings:
    """The mirror runs outside the pass, so its sacctmgr calls may take longer than the pass's
    per-command ``timeout_s``: ``mirror_timeout_s`` (default 120 s) applies to them."""
    return replace(settings, timeout_s=max(settings.timeout_s, settings.mirror_timeout_s))


@dataclass(frozen=True, slots=True)
class MirrorPlan:
    """What one mirror changes in Slurm (computed without calling it)."""

    load: tuple[WantedAccount, ...]  # accounts to create or whose share changed
    created: tuple[str, ...]
    shares: tuple[tuple[str, int], ...]
    moved: tuple[tuple[str, str], ...]  # (account, new parent)
    reopened: tuple[str, ...]
    closed: tuple[str, ...]
    users_added: tuple[tuple[str, str], ...]  # (account, user)
    users_removed: tuple[tuple[str, str], ...]


def mirror_plan(
    wanted: tuple[WantedAccount, ...], current: tuple[SlurmAssociation, ...], ours: frozenset[str]
) -> MirrorPlan:
    own_rows = {row.account: row for row in current if not row.user}
    user_rows = {(row.account, row.user) for row in current if row.user}
    created = tuple(a.name for a in wanted if a.name not in own_rows)
    shares = tuple(
        (a.name, a.shares) for a in wanted if a.name in own_rows and own_rows[a.name].shares != str(a.shares)
    )
    moved = tuple(
        (a.name, a.parent) for a in wanted if a.name in own_rows and own_rows[a.name].parent != a.parent
    )
    reopened = tuple(a.name for a in wanted if a.name in own_rows and own_rows[a.name].closed)
    wanted_pairs = {(a.name, user) for a in wanted for user in a.users}
    users_added = tuple(sorted(wanted_pairs - user_rows))
    wanted_names = {a.name for a in wanted}
    # Users who left: their associations under accounts the mirror manages and still wants.
    users_removed = tuple(
        sorted(
            (account, user) for account, user in user_rows - wanted_pairs if account in wanted_names & ours
        )
    )
    open_rows = {row.account for row in current if not row.user and not row.closed}
    closed = tuple(sorted((ours & open_rows) - wanted_names))
    changed = set(created) | {name for name, _ in shares} | {account for account, _ in users_added}
    load = tuple(a for a in wanted if a.name in changed)
    return MirrorPlan(load, created, shares, moved, reopened, closed, users_added, users_removed)


def load_file(plan: MirrorPlan, *, cluster_name: str, known_users: set[str]) -> str:
    """The `sacctmgr load` file that creates the plan's accounts (parents first), sets their
    shares and adds their users; a user Slurm does not know yet gets the account as default."""
    lines = [f"Cluster - '{cluster_name}'"]
    adding: dict[str, list[str]] = {}
    for account, user in plan.users_added:
        adding.setdefault(account, []).append(user)
    for parent in dict.fromkeys(a.parent for a in plan.load):
        lines.append(f"Parent - '{parent}'")
        for a in (a for a in plan.load if a.parent == parent):
            lines.append(
                f"Account - '{a.name}':Description='{a.path}':Organization='{PORTAL_ORGANIZATION}'"
                f":Fairshare={a.shares}"
            )
    for account in dict.fromkeys(a.name for a in plan.load):
        users = adding.get(account, [])
        if not users:
            continue
        lines.append(f"Parent - '{account}'")
        for user in users:
            default = "" if user in known_users else f":DefaultAccount='{account}'"
            known_users.add(user)
            lines.append(f"User - '{user}'{default}")
    return "\n".join(lines) + "\n"


def _apply_plan(plan: MirrorPlan, cli: CountingCli, *, cluster_name: str, known_users: set[str]) -> None:
    from .slurm import SlurmCommandError

    def sacctmgr(*args: str) -> str:
        return cli.run("sacctmgr", "-i", *args)

    if plan.load:
        with tempfile.NamedTemporaryFile("w", suffix=".cfg", prefix="portal-accounts-") as file:
            file.write(load_file(plan, cluster_name=cluster_name, known_users=known_users))
            file.flush()
            os.chmod(file.name, 0o644)  # readable by an operator account the calls may run as
            sacctmgr("load", f"file={file.name}")
    for name, parent in plan.moved:
        sacctmgr("modify", "account", "where", f"name={name}", "set", f"parent={parent}")
    if plan.reopened:
        sacctmgr("modify", "account", "where", f"name={','.join(plan.reopened)}", "set", "GrpSubmitJobs=-1",
                 "GrpJobs=-1")  # fmt: skip
    if plan.closed:
        sacctmgr("modify", "account", "where", f"name={','.join(plan.closed)}", "set", "GrpSubmitJobs=0",
                 "GrpJobs=0")  # fmt: skip
    leaving: dict[str, list[str]] = {}
    for account, user in plan.users_removed:
        leaving.setdefault(user, []).append(account)
    for user, accounts in sorted(leaving.items()):
        try:
            sacctmgr("delete", "user", "where", f"name={user}", f"account={','.join(accounts)}")
        except SlurmCommandError as error:  # e.g. their jobs still run: the next change tries again
            logger.warning("Slurm kept %s's associations %s: %s", user, ",".join(accounts), error)


def _cluster_name(cluster: Cluster, cli: CountingCli) -> str:
    """Slurm's ClusterName: ``backend_settings["cluster_name"]``, else what slurm.conf says."""
    configured = (cluster.backend_settings or {}).get("cluster_name")
    if configured:
        return str(configured)
    for line in cli.run("scontrol", "show", "config").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName":
            return value.strip()
    from .slurm import SlurmCommandError

    raise SlurmCommandError("scontrol show config names no ClusterName")
