"""One pass per cluster at a time, claimed in the database (never by asking Celery).

PostgreSQL: a session-level ``pg_try_advisory_lock(namespace, cluster id)``; a worker that dies
drops its connection and with it the lock. Elsewhere (SQLite): a conditional UPDATE of the
cluster's PassLease row that only succeeds when no live lease is held; a lease held by a dead
worker expires after ``SCHEDULING_PASS_LEASE_S``. While another connection writes, SQLite may
refuse the claim outright ("database table is locked"): that is another process at work, so the
claim is simply not had (the next beat tries again); the release, and the pass's first writes
once it holds the claim, are retried a few times (``retry_on_contention``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import OperationalError, connection
from django.db.models import Q
from django.utils import timezone

from portal.contention import is_contention
from scheduling.models import PassLease

logger = logging.getLogger(__name__)
RETRY_TRIES = 20  # about 2 s in all (a lease not released lapses on its own)
T = TypeVar("T")

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
    try:
        claimed = _lease_take(cluster_id, token)
    except OperationalError as error:
        if not is_contention(error):
            raise
        logger.info("pass claim for cluster %s not had: %s", cluster_id, error)
        claimed = False
    try:
        yield claimed
    finally:
        if claimed:
            _lease_release(cluster_id, token)


def _lease_take(cluster_id: int, token: str) -> bool:
    """The conditional UPDATE: True when no live lease was held and this token now holds it."""
    now = timezone.now()
    PassLease.objects.get_or_create(cluster_id=cluster_id)
    lease_s = getattr(settings, "SCHEDULING_PASS_LEASE_S", 300)
    updated = (
        PassLease.objects.filter(pk=cluster_id)
        .filter(Q(holder="") | Q(expires_at__isnull=True) | Q(expires_at__lt=now))
        .update(holder=token, expires_at=now + timedelta(seconds=lease_s))
    )
    return updated == 1


def _lease_release(cluster_id: int, token: str) -> None:
    def release() -> int:
        return PassLease.objects.filter(pk=cluster_id, holder=token).update(holder="", expires_at=None)

    if retry_on_contention(release) is None:
        logger.warning("pass lease of cluster %s not released (it lapses by itself)", cluster_id)


def retry_on_contention(write: Callable[[], T], tries: int = RETRY_TRIES) -> T | None:
    """Do ``write``, again after 0.1 s while the database refuses it for another connection's
    writes (SQLite: "database table is locked"), at most ``tries`` times; None when it never got
    through. Any other error is raised. (Call it outside a transaction: a refused statement
    spoils the transaction it is in.)"""
    for attempt in range(tries):
        try:
            return write()
        except OperationalError as error:
            if not is_contention(error):
                raise
            logger.info("write refused (attempt %s of %s): %s", attempt + 1, tries, error)
            if attempt < tries - 1:
                time.sleep(0.1)
    return None
