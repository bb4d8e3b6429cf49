"""DRF authentication by ``Authorization: Token <secret>`` against the hashed tokens of portal.tokens."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from portal.models import ApiToken
from portal.tokens import token_authenticate


class ApiTokenAuthentication(TokenAuthentication):
    """DRF's header parsing, our lookup: unknown, revoked and expired tokens get 401."""

    def authenticate_credentials(self, key: str) -> tuple[object, ApiToken]:
        token = token_authenticate(key)
        if token is None or not token.user.is_active:
            raise AuthenticationFailed("Invalid, expired or revoked token.")
        return token.user, token
