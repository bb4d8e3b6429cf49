"""Budget paths as Slurm account names, and the sacctmgr mirror of the budget tree.

Mapping (deterministic, unique, reversible): the slug path with "/" replaced by "." —
``ai2/nlp/olmo`` is the Slurm account ``ai2.nlp.olmo``. Slugs never contain ".", so the mapping is
one-to-one, and Slurm's lower-case account names keep slugs intact. A name longer than
``MAX_ACCOUNT_LENGTH`` is cut and ends in "-" plus the first 8 hex digits of the path's SHA-1; the
full path is then read back from the account's Description, which the mirror always sets to the path.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduling.models import Cluster

    from .slurm import SlurmCli

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


@dataclass(frozen=True, slots=True)
class WantedAccount:
    name: str
    path: str
    parent: str  # parent account name; "root" for the top of the tree
    users: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MirrorReport:
    created: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()
    reopened: tuple[str, ...] = ()
    closed: tuple[str, ...] = ()
    users_added: tuple[str, ...] = ()  # "account:user"


def parse_associations(text: str) -> tuple[SlurmAssociation, ...]:
    """`sacctmgr -n -P show assoc format=account,user,parentname,grpsubmit` into plain rows."""
    rows = []
    for line in text.splitlines():
        account, user, parent, grp_submit = (line.split("|") + ["", "", "", ""])[:4]
        rows.append(SlurmAssociation(account, user, parent, closed=grp_submit.strip() == "0"))
    return tuple(sorted(rows, key=lambda row: (row.account, row.user)))


def parse_portal_accounts(text: str) -> frozenset[str]:
    """Names of accounts the mirror manages, from `show account format=account,organization`."""
    pairs = (line.split("|") for line in text.splitlines() if "|" in line)
    return frozenset(name for name, organization, *_ in pairs if organization == PORTAL_ORGANIZATION)


def wanted_accounts(*, cluster: Cluster) -> tuple[WantedAccount, ...]:
    """Every live budget node as an account, parents first; users: members plus the cluster's
    ``backend_settings["slurm_users"]`` (default ["root"], so the portal itself may submit)."""
    from budgets.models import BudgetNode, Membership

    extra_users = tuple((cluster.backend_settings or {}).get("slurm_users", ["root"]))
    members: dict[int, set[str]] = {}
    for node_id, username in Membership.objects.values_list("node_id", "user__username"):
        members.setdefault(node_id, set()).add(username)
    nodes = BudgetNode.objects.filter(archived=False).select_related("parent").order_by("path")
    return tuple(
        WantedAccount(
            name=account_name(node.path),
            path=node.path,
            parent=account_name(node.parent.path) if node.parent is not None else "root",
            users=tuple(sorted(set(extra_users) | members.get(node.id, set()))),
        )
        for node in sorted(nodes, key=lambda node: (node.path.count("/"), node.path))
    )


def accounts_digest(wanted: tuple[WantedAccount, ...]) -> str:
    """SHA-256 of the wanted account tree (names, parents, paths, users): equal digests, nothing to mirror."""
    text = "\n".join(f"{a.name}|{a.parent}|{a.path}|{','.join(a.users)}" for a in wanted)
    return hashlib.sha256(text.encode()).hexdigest()


def slurm_accounts_sync(*, cluster: Cluster, cli: SlurmCli | None = None) -> MirrorReport | None:
    """Mirror the budget tree into Slurm when it changed since the last mirror; None when unchanged.

    Called by every pass of a Slurm cluster, so it costs two queries when nothing changed. The digest
    is stored only after a mirror succeeds: a failed one is tried again by the next pass.
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


def mirror_accounts(
    *, cluster: Cluster, cli: SlurmCli | None = None, wanted: tuple[WantedAccount, ...] | None = None
) -> MirrorReport:
    """Make Slurm's account tree match the budget tree: create and move accounts, add users, and
    close (GrpSubmitJobs=0 GrpJobs=0, never delete: accounting keeps its history) accounts whose
    budget node was archived or removed; reopen them if they come back."""
    from .slurm import SlurmCli, SlurmSettings

    cli = cli or SlurmCli(SlurmSettings.from_mapping(cluster.backend_settings or {}))

    def sacctmgr(*args: str) -> str:
        return cli.run("sacctmgr", "-i", *args)

    wanted = wanted if wanted is not None else wanted_accounts(cluster=cluster)
    current = parse_associations(
        cli.run("sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,parentname,grpsubmit")
    )
    ours = parse_portal_accounts(
        cli.run("sacctmgr", "-n", "-P", "show", "account", "format=account,organization")
    )
    report = _mirror_wanted(wanted, current, sacctmgr)
    closed = _close_departed(wanted, current, ours, sacctmgr)
    return MirrorReport(**{**_as_dict(report), "closed": closed})


def _mirror_wanted(
    wanted: tuple[WantedAccount, ...], current: tuple[SlurmAssociation, ...], sacctmgr: Callable[..., str]
) -> MirrorReport:
    """Create missing accounts (parents first), move re-parented ones, reopen closed ones, add users.
    sacctmgr takes name lists, so reopening and adding users cost one call each, not one per account."""
    own_rows = {row.account: row for row in current if not row.user}
    user_rows = {(row.account, row.user) for row in current if row.user}
    created, moved, reopened = [], [], []
    for account in wanted:
        row = own_rows.get(account.name)
        if row is None:
            sacctmgr(
                "add", "account", account.name, f"parent={account.parent}",
                f"description={account.path}", f"organization={PORTAL_ORGANIZATION}",
            )  # fmt: skip
            created.append(account.name)
        elif row.parent != account.parent:
            sacctmgr("modify", "account", "where", f"name={account.name}", "set", f"parent={account.parent}")
            moved.append(account.name)
        if row is not None and row.closed:
            reopened.append(account.name)
    if reopened:
        sacctmgr(
            "modify",
            "account",
            "where",
            f"name={','.join(reopened)}",
            "set",
            "GrpSubmitJobs=-1",
            "GrpJobs=-1",
        )
    missing_users = sorted(
        (user, account.name)
        for account in wanted
        for user in account.users
        if (account.name, user) not in user_rows
    )
    for user in sorted({user for user, _ in missing_users}):
        accounts = [name for who, name in missing_users if who == user]
        sacctmgr("add", "user", user, f"account={','.join(accounts)}")
    users_added = tuple(f"{name}:{user}" for user, name in missing_users)
    return MirrorReport(tuple(created), tuple(moved), tuple(reopened), (), users_added)


def _close_departed(
    wanted: tuple[WantedAccount, ...],
    current: tuple[SlurmAssociation, ...],
    ours: frozenset[str],
    sacctmgr: Callable[..., str],
) -> tuple[str, ...]:
    wanted_names = {account.name for account in wanted}
    open_rows = {row.account for row in current if not row.user and not row.closed}
    departed = sorted((ours & open_rows) - wanted_names)
    if departed:
        sacctmgr(
            "modify", "account", "where", f"name={','.join(departed)}", "set", "GrpSubmitJobs=0", "GrpJobs=0"
        )
    return tuple(departed)


def _as_dict(report: MirrorReport) -> dict:
    return {name: getattr(report, name) for name in report.__slots__}
