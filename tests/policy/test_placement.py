"""Placement (DESIGN 5.1): best fit on one node, whole nodes in one domain for gangs, never overcommit."""

import pytest

from scheduling.policy import ClusterNodeSpec
from scheduling.policy.placement import FreeIndex


def index_with(
    free: dict[str, int], size: int = 8, gpu_type: str = "H100", domains: dict[str, str] | None = None
):
    domains = domains or {}
    index = FreeIndex(ClusterNodeSpec(name, size, gpu_type, domains.get(name, "d0")) for name in free)
    for name, count in free.items():
        index.take(((name, size - count),))
    return index


@pytest.mark.parametrize(
    ("free", "gpus", "expected"),
    [
        pytest.param({"a": 8, "b": 3, "c": 5}, 3, (("b", 3),), id="the fullest node that still fits"),
        pytest.param({"a": 8, "b": 3, "c": 5}, 4, (("c", 4),), id="skips nodes that are too full"),
        pytest.param({"a": 4, "b": 4}, 4, (("a", 4),), id="equal fit goes to the first name"),
        pytest.param({"a": 2, "b": 3}, 4, None, id="no single node fits"),
    ],
)
def test_one_node_jobs_go_to_the_best_fit(free, gpus, expected):
    assert index_with(free).place((gpus, None, None)) == expected


def test_a_gang_takes_whole_nodes_in_one_domain_when_one_has_enough():
    free = {"a1": 8, "a2": 8, "b1": 8, "b2": 8, "b3": 8}
    domains = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "b3": "b"}
    placement = index_with(free, domains=domains).place((16, None, None))
    assert placement == (("a1", 8), ("a2", 8))


def test_a_gang_spreads_over_the_fewest_domains_when_no_domain_has_enough():
    free = {"a1": 8, "b1": 8, "b2": 8, "c1": 8}
    domains = {"a1": "a", "b1": "b", "b2": "b", "c1": "c"}
    placement = index_with(free, domains=domains).place((24, None, None))
    assert placement == (("a1", 8), ("b1", 8), ("b2", 8))


def test_a_gang_is_all_or_nothing():
    index = index_with({"a": 8, "b": 7})
    assert index.place((16, None, None)) is None
    assert index.free == {"a": 8, "b": 7}


def test_an_explicit_gpus_per_node_spreads_the_job():
    placement = index_with({"a": 2, "b": 4, "c": 8}).place((4, 2, None))
    assert placement == (("a", 2), ("b", 2))


def test_only_the_requested_gpu_type_is_used():
    index = FreeIndex([ClusterNodeSpec("h", 8, "H100"), ClusterNodeSpec("a", 8, "A100")])
    assert index.place((8, None, "A100")) == (("a", 8),)
    assert index.place((8, None, "B200")) is None


def test_taking_more_than_is_free_is_refused():
    index = index_with({"a": 2})
    with pytest.raises(ValueError, match="overcommitted"):
        index.take((("a", 3),))


def test_free_counts_follow_take_and_give():
    index = index_with({"a": 8, "b": 8})
    index.take((("a", 8), ("b", 3)))
    assert index.free_gpus(None) == 5
    assert index.place((8, None, None)) is None
    index.give((("a", 8),))
    assert index.place((8, None, None)) == (("a", 8),)
