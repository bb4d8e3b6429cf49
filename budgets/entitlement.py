"""Entitlement: the GPUs each budget node is due on a cluster after the chain of shares (DESIGN 2).

Pure: plain mappings in, a plain mapping out, no ORM. The budget editor and delivery pages
(``budgets.selectors.budget_tree``, in ``Decimal``) and the pass's owed GPU-seconds
(``scheduling.snapshot.owed_rates``, in ``float``) both call :func:`entitlements`, so the
number a manager reads is the number owed is charged at.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping
from decimal import Decimal
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)
Number = TypeVar("Number", float, Decimal)


def entitlements(
    *, allocations: Mapping[Key, Number], parents: Mapping[Key, Key | None], available: Number
) -> dict[Key, Number]:
    """Each node's entitlement in GPUs, in the number type given (``float`` or ``Decimal``).

    entitlement(n) = allocation(n) x entitlement(p) / max(allocation(p), sum of allocations of n and its siblings)

    where p is n's parent; the roots hang under the cluster, whose allocation and entitlement are
    both ``available`` (its healthy GPUs). Siblings promised more than their parent holds
    (over-commitment) are scaled down pro rata, so siblings' entitlements never add up to more than
    their parent's; promised less, the rest stays with no one (it is not redistributed).

    Range: 0 <= entitlement(n) <= entitlement(p) <= available.

    Edge cases: a node with allocation 0 gets 0, and so does everything below it (a parent with no
    budget gives its children nothing, whatever theirs); ``available`` 0 gives every node 0; a
    divisor of 0 (parent and all siblings at 0) gives 0, never a division error. A node whose
    parent is not a key of ``parents`` (an archived parent, say) is unreachable and left out of
    the result: read a missing node as 0. ``allocations`` must hold every key of ``parents``
    (0 for nodes without an allocation). Ties: none, sibling order never changes a value.
    """
    children: dict[Key | None, list[Key]] = defaultdict(list)
    for node, parent in parents.items():
        children[parent].append(node)
    result: dict[Key, Number] = {}
    stack: list[tuple[Key | None, Number, Number]] = [(None, available, available)]
    while stack:
        parent, parent_allocation, parent_entitlement = stack.pop()
        siblings = children.get(parent, [])
        divisor = max(parent_allocation, sum((allocations[node] for node in siblings), available * 0))
        for node in siblings:
            own = allocations[node]
            result[node] = own * parent_entitlement / divisor if divisor > 0 else own * 0
            stack.append((node, own, result[node]))
    return result
