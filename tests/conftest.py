"""Shared fixtures. Personas follow DESIGN 1: a manager, a researcher, an on-call engineer, an admin."""

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In CI a skip is a failure: tests that need Slurm or a browser must really run there."""
    if os.environ.get("CI", "").lower() != "true":
        return
    config._ci_fail_on_skip = True  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    allowed = item.get_closest_marker("kubernetes_live") is not None
    if getattr(item.config, "_ci_fail_on_skip", False) and report.skipped and not allowed:
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which counts as a failure: {report.longrepr}"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Throttle counters (and cached reads) live in the cache: each test starts without them."""
    from django.core.cache import cache

    cache.clear()
