"""Production settings: `check --deploy` is clean with HTTPS on, and every page carries a
Content-Security-Policy that allows no inline script (the browser tests run the pages under it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent


def test_check_deploy_is_clean_with_https_on(tmp_path):
    env = {
        **os.environ,
        "HTTPS": "true",
        "DEBUG": "false",
        "SECRET_KEY": "k7#Qz!v9@Lr2$Wm5^Tn8&Hx3*Jc6(Pb1)Fd4_Gs0+Ye-Ua=Oi;Ek:Rl<Zq>Xw?",
        "ALLOWED_HOSTS": "portal.example.org",
        "VAR_DIR": str(tmp_path),
        "STATIC_ROOT": str(tmp_path / "static"),
    }
    env.pop("DATABASE_URL", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser tests' live server, never in production
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("url", ["/login/", "/api/docs/"])
def test_pages_carry_a_policy_without_inline_script(db, url):
    response = Client().get(url)
    policy = {
        directive.split()[0]: directive.split()[1:]
        for directive in response.headers["Content-Security-Policy"].split(";")
        if directive.strip()
    }

    assert policy["script-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["object-src"] == ["'none'"]


def test_no_template_has_an_inline_script_or_event_handler():
    offenders = []
    for template in ROOT.glob("**/templates/**/*.html"):
        if ".venv" in template.parts:
            continue
        text = template.read_text()
        if "<script>" in text or " onclick=" in text or " onchange=" in text or " onsubmit=" in text:
            offenders.append(str(template.relative_to(ROOT)))

    assert offenders == []
