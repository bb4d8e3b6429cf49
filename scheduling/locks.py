"""One pass per cluster at a time, claimed in the database (never by asking Celery).

PostgreSQL: a session-level ``pg_try_advisory_lock(namespace, cluster id)``; a worker that dies
drops its connection and with it the lock. Elsewhere (SQLite): a conditional UPDATE of the
cluster's PassLease row that only succeeds when no live lease is held; a lease held by a dead
worker expires after ``SCHEDULING_PASS_LEASE_S``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from scheduling.models import PassLease

LOCK_NAMESPACE = 0x5C4ED  # the advisory-lock class reserved for scheduling passes


@contextmanager
def pass_claim(cluster_id: int) -> Iterator[bool]:
    """Yield True when this process holds the cluster's pass, False when another one does."""
    claim = _advisory_claim if connection.vendor == "postgresql" else _lease_claim
    with claim(cluster_id) as claimed:
        yield claimed


@contextmanager
def _advisory_claim(cluster_id: int) -> Iterator[bool]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, cluster_id])
        claimed = bool(cursor.fetchone()[0])
    try:
        yield claimed
    finally:
        if claimed:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, cluster_id])


@contextmanager
def _lease_claim(cluster_id: int) -> Iterator[bool]:
    token = uuid.uuid4().hex
    now = timezone.now()
    PassLease.objects.get_or_create(cluster_id=cluster_id)
    lease_s = getattr(settings, "SCHEDULING_PASS_LEASE_S", 300)
    claimed = (
        PassLease.objects.filter(pk=cluster_id)
        .filter(Q(holder="") | Q(expires_at__isnull=True) | Q(expires_at__lt=now))
        .update(holder=token, expires_at=now + timedelta(seconds=lease_s))
    )
    try:
        yield claimed == 1
    finally:
        if claimed:
            PassLease.objects.filter(pk=cluster_id, holder=token).update(holder="", expires_at=None)
