"""API tokens: issue, list, revoke, authenticate. Stored hashed; they may expire.

Why not django-rest-knox (which also hashes): its token has no name, and a user here lists and
revokes tokens by name from a page. The scheme is the same in spirit: a 256-bit random secret,
so a plain SHA-256 digest (no slow password hash) is enough to make a stolen table useless, and a
short random prefix finds the row without comparing digests across users.

A secret reads ``<prefix>.<random>``; it is shown once, when issued, and never again.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from portal.models import ApiToken

MAX_EXPIRY_DAYS = 3650
LAST_USED_EVERY = timedelta(minutes=1)  # how stale ``last_used_at`` may be, to spare a write per call


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_issue(
    *, user: User | AnonymousUser, name: str, expires_in_days: int | None = None
) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns the row and the secret (the only time it is known)."""
    if isinstance(user, AnonymousUser):
        raise PermissionDenied("Sign in to get a token.")
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError({"name": "Name the token, e.g. after the machine or script that uses it."})
    if len(name) > 100:
        raise ValidationError({"name": "Keep the name under 100 characters."})
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
        raise ValidationError({"expires_in_days": f"Between 1 and {MAX_EXPIRY_DAYS} days, or none."})
    prefix = secrets.token_hex(4)
    secret = f"{prefix}.{secrets.token_urlsafe(32)}"
    expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user, name=name, prefix=prefix, digest=_digest(secret), expires_at=expires_at
        )
    return token, secret


def tokens_of(*, user: User | AnonymousUser) -> QuerySet[ApiToken]:
    """The user's tokens, newest first (revoked and expired ones too: the list is their history)."""
    if isinstance(user, AnonymousUser):
        return ApiToken.objects.none()
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


def token_revoke(*, user: User | AnonymousUser, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens (404 for anyone else's); revoking twice changes nothing."""
    token = tokens_of(user=user).filter(pk=token_id).first()
    if token is None:
        raise Http404("No such token.")
    if token.revoked_at is None:
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        token.refresh_from_db()
    return token


def token_is_live(token: ApiToken) -> bool:
    """Not revoked and not expired."""
    return token.revoked_at is None and (token.expires_at is None or token.expires_at > timezone.now())


def token_authenticate(secret: str) -> ApiToken | None:
    """The live token whose secret this is, or None (unknown, wrong, revoked or expired)."""
    prefix, _, _ = secret.partition(".")
    token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None or not hmac.compare_digest(token.digest, _digest(secret)) or not token_is_live(token):
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
