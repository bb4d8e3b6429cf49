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

MAX_ACCOUNT_LENGTH = 64
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
