"""Shared browser fixtures: Playwright driving Debian's Chromium against pytest-django's live server.

Reuse them from any browser test:

    def test_something(page, live_server, demo_data, login, console_errors, screenshot):
        login("manager")                       # persona usernames from budgets/demo.py, password "demo"
        page.goto(live_server.url + "/budgets/main/")
        screenshot("budget-tree-1280")         # full page, saved under test-artifacts/
        assert console_errors == []

``page`` is 1280 x 900; ask for a phone-sized one with
``@pytest.mark.parametrize("viewport", [1280, 390], indirect=True)``. Mark modules ``pytestmark = pytest.mark.browser``. Outside CI the tests skip when /usr/bin/chromium is absent; in CI they must run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

# Playwright's sync API runs an event loop in this thread; Django must still allow ORM calls here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORTS = {1280: {"width": 1280, "height": 900}, 390: {"width": 390, "height": 844}}
DEMO_PASSWORD = "demo"


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing; CI must run the browser tests (make browsers installs it)")
        pytest.skip(f"{CHROMIUM} is not installed; run `sudo make browsers` to run the browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def viewport(request: pytest.FixtureRequest) -> int:
    return getattr(request, "param", 1280)


@pytest.fixture
def page(browser, viewport: int) -> Iterator[object]:  # noqa: ANN001
    context = browser.new_context(viewport=VIEWPORTS[viewport])
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.console_errors = []  # type: ignore[attr-defined]
    page.on("console", lambda message: message.type == "error" and page.console_errors.append(message.text))
    page.on("pageerror", lambda error: page.console_errors.append(str(error)))
    yield page
    context.close()


@pytest.fixture
def console_errors(page) -> list[str]:  # noqa: ANN001
    """JS errors and failed loads seen by ``page`` so far (the list keeps filling)."""
    return page.console_errors


@pytest.fixture
def demo_data(transactional_db: None) -> None:
    """The demo organisation (budgets/demo.py): personas manager / researcher / oncall / admin."""
    with open(os.devnull, "w") as quiet:
        call_command("load_demo", stdout=quiet)


@pytest.fixture
def login(page, live_server) -> Callable[..., None]:  # noqa: ANN001
    def log_in(username: str, password: str = DEMO_PASSWORD, *, on: object = None) -> None:
        target = on or page
        target.goto(f"{live_server.url}/login/")
        target.fill("input[name=username]", username)
        target.fill("input[name=password]", password)
        target.click("form button[type=submit]")
        target.wait_for_url(f"{live_server.url}/")

    return log_in


@pytest.fixture
def screenshot(page) -> Callable[..., Path]:  # noqa: ANN001
    def take(name: str, *, on: object = None) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        (on or page).screenshot(path=str(path), full_page=True)
        return path

    return take
