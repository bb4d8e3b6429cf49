"""The acceptance gate of the policy refactor: every plan is what commit 7040c65 planned."""

from benchmarks import plan_digest


def test_every_plan_is_the_one_commit_7040c65_made():
    assert plan_digest.digests() == plan_digest.BASELINE
