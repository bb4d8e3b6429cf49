"""Schemathesis over ``/api/schema/``: every operation, as staff and as a researcher, with generated
valid and invalid input. No answer may be a 5xx and every answer must match its documented schema.

Bounded: ``FUZZ_EXAMPLES`` examples per operation (default 12, derandomized so CI is repeatable);
raise it locally (``FUZZ_EXAMPLES=200``) for a deeper, randomized hunt.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from budgets.api_tokens import token_issue
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from portal.wsgi import application

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))

schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture
def api_schema(db):  # noqa: ANN001, ANN201
    return schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture(params=["oscar", "bob"], ids=["staff", "researcher"])
def token_header(request, lab) -> dict[str, str]:  # noqa: ANN001
    _, secret = token_issue(user=getattr(lab, request.param), name="fuzz")
    return {"Authorization": f"Token {secret}"}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 12,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_5xx_or_breaks_its_schema(case, token_header):  # noqa: ANN001
    case.call_and_validate(headers=token_header, checks=[not_a_server_error, response_schema_conformance])
