"""Is a database error another transaction's doing (retry or 409), or a bug of ours (500)?"""

from __future__ import annotations

from django.db import OperationalError

# PostgreSQL SQLSTATEs: deadlock_detected, lock_not_available, serialization_failure, query_canceled
CONTENTION_SQLSTATES = frozenset({"40P01", "55P03", "40001", "57014"})
CONTENTION_MESSAGE = "Someone else changed the same data at the same moment; nothing was saved. Try again."


def is_contention(error: BaseException) -> bool:
    """Did the database refuse the statement because of another transaction?"""
    if not isinstance(error, OperationalError):
        return False
    sqlstate = getattr(error.__cause__, "sqlstate", None)
    if sqlstate is not None:
        return sqlstate in CONTENTION_SQLSTATES
    return "locked" in str(error)  # SQLite: "database is locked", "database table is locked"
