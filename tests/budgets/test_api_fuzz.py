"""Schemathesis over ``/api/schema/``: every operation, as staff and as a researcher, with generated
valid and invalid input. No answer may be a 5xx and every answer must match its documented schema.

Bounded: ``FUZZ_EXAMPLES`` examples per operation (default 12, derandomized so CI is repeatable);
raise it locally (``FUZZ_EXAMPLES=200``) for a deeper, randomized hunt.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from portal.tokens import token_issue
from portal.wsgi import application

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)  # served by the app, in-process


@pytest.fixture(autouse=True)
def _keep_the_test_connection():  # noqa: ANN202
    """As in Django's test client: a finished request must not close the connection that holds
    the test's transaction."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _token_header(user) -> dict[str, str]:  # noqa: ANN001
    _, secret = token_issue(user=user, name="fuzz")
    return {"Authorization": f"Token {secret}"}


BOUNDED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 12,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
CHECKS = [not_a_server_error, response_schema_conformance]


@schema.parametrize()
@BOUNDED
def test_as_staff_no_operation_answers_5xx_or_breaks_its_schema(case, lab):  # noqa: ANN001
    case.call_and_validate(headers=_token_header(lab.oscar), checks=CHECKS)


@schema.parametrize()
@BOUNDED
def test_as_a_researcher_no_operation_answers_5xx_or_breaks_its_schema(case, lab):  # noqa: ANN001
    case.call_and_validate(headers=_token_header(lab.bob), checks=CHECKS)
