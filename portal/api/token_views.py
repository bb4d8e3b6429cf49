"""``/api/v1/auth/token/`` (password -> a new token) and ``/api/v1/tokens/`` (list, create, revoke).

Password checks go through ``django.contrib.auth.authenticate`` with the request, so django-axes
counts failures per username and per address and locks both out (429, see portal.throttling);
the endpoint is also rate-limited per address by DRF's scoped throttle ``token``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import api_view, permission_classes, throttle_classes
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from portal.models import ApiToken
from portal.throttling import TokenRequestThrottle
from portal.tokens import MAX_EXPIRY_DAYS, token_is_live, token_issue, token_revoke, tokens_of


class ApiTokenSerializer(serializers.ModelSerializer):
    live = serializers.SerializerMethodField(help_text="Neither revoked nor expired")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at", "live"]
        read_only_fields = fields

    def get_live(self, token: ApiToken) -> bool:
        return token_is_live(token)


class IssuedTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(help_text="The secret: shown this once, store it now")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="What uses it, e.g. 'laptop' or 'ci'")
    expires_in_days = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_EXPIRY_DAYS,
        help_text="Days until it stops working; omit or null for no expiry",
    )  # fmt: skip


class PasswordTokenSerializer(TokenCreateSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})
    name = serializers.CharField(max_length=100, required=False, default="api")


def _issued(token: ApiToken, secret: str) -> dict:
    return {**ApiTokenSerializer(token).data, "token": secret}


def _issue(**kwargs: Any) -> tuple[ApiToken, str]:
    try:
        return token_issue(**kwargs)
    except DjangoValidationError as error:
        raise ValidationError(error.message_dict) from None


@extend_schema(request=PasswordTokenSerializer, responses={201: IssuedTokenSerializer})
@api_view(["POST"])
@permission_classes([AllowAny])
@throttle_classes([TokenRequestThrottle])
def obtain_token(request: Request) -> Response:
    """A new named token for a username and password (rate-limited; locked out after failures)."""
    body = PasswordTokenSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    data = body.validated_data
    user = authenticate(request._request, username=data["username"], password=data["password"])
    if user is None or not user.is_active:
        raise ValidationError(
            {"non_field_errors": ["Unable to log in with the username and password given."]}
        )
    token, secret = _issue(user=user, name=data["name"], expires_in_days=data.get("expires_in_days"))
    return Response(_issued(token, secret), status=status.HTTP_201_CREATED)


class ApiTokenViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """The caller's own API tokens: list, create (named, optionally expiring), revoke (DELETE)."""

    serializer_class = ApiTokenSerializer
    filterset_fields: list[str] = []

    def get_queryset(self):  # noqa: ANN201
        return tokens_of(user=self.request.user)

    @extend_schema(request=TokenCreateSerializer, responses={201: IssuedTokenSerializer})
    def create(self, request: Request) -> Response:
        body = TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, secret = _issue(user=request.user, **body.validated_data)
        return Response(_issued(token, secret), status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        """Revoke: the token stops working at once and stays listed as revoked."""
        token_revoke(user=request.user, token_id=self.get_object().pk)
        return Response(status=status.HTTP_204_NO_CONTENT)
