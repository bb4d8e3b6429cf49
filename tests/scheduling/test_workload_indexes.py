"""Indexes the pages rely on exist in the database."""

from __future__ import annotations

import pytest
from django.db import connection

from scheduling.models import Workload


@pytest.mark.django_db
def test_home_pages_find_a_users_workloads_by_state_through_an_index():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Workload._meta.db_table)
    assert any(c["index"] and c["columns"] == ["user_name", "state"] for c in constraints.values())
