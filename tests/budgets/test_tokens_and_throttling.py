"""API tokens (named, listed, revocable, expiring, stored hashed) and sign-in throttling."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from portal.models import ApiToken
from portal.throttling import TokenRequestThrottle
from portal.tokens import token_issue


def _with_token(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_a_token_is_stored_hashed_and_shown_only_when_issued(lab):
    token, secret = token_issue(user=lab.bob, name="laptop")

    stored = ApiToken.objects.get(pk=token.pk)
    assert secret not in (stored.digest, stored.prefix) and stored.digest != secret
    assert secret.startswith(stored.prefix + ".")
    assert "token" not in _with_token(secret).get("/api/v1/tokens/").json()["results"][0]


def test_a_revoked_token_gets_401(lab):
    token, secret = token_issue(user=lab.bob, name="laptop")
    client = _with_token(secret)
    assert client.get("/api/v1/budget-nodes/").status_code == 200

    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 204

    assert client.get("/api/v1/budget-nodes/").status_code == 401
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_an_expired_token_gets_401(lab):
    token, secret = token_issue(user=lab.bob, name="ci", expires_in_days=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert _with_token(secret).get("/api/v1/budget-nodes/").status_code == 401


def test_a_wrong_secret_with_a_real_prefix_gets_401(lab):
    token, secret = token_issue(user=lab.bob, name="laptop")

    assert _with_token(f"{token.prefix}.not-the-secret").get("/api/v1/budget-nodes/").status_code == 401


def test_a_user_lists_creates_and_revokes_only_their_own_tokens_through_the_api(lab):
    client = APIClient()
    client.force_authenticate(lab.bob)
    created = client.post(
        "/api/v1/tokens/", {"name": "cluster login node", "expires_in_days": 30}, format="json"
    )
    other, _ = token_issue(user=lab.alice, name="alice's")

    assert created.status_code == 201 and created.json()["expires_at"] is not None
    assert [t["name"] for t in client.get("/api/v1/tokens/").json()["results"]] == ["cluster login node"]
    assert client.delete(f"/api/v1/tokens/{other.pk}/").status_code == 404
    assert ApiToken.objects.get(pk=other.pk).revoked_at is None


def test_a_token_needs_a_name_and_a_sane_expiry(lab):
    client = APIClient()
    client.force_authenticate(lab.bob)

    response = client.post("/api/v1/tokens/", {"name": " ", "expires_in_days": 0}, format="json")

    assert response.status_code == 400 and set(response.json()) == {"name", "expires_in_days"}


def test_the_tokens_page_creates_shows_the_secret_once_and_revokes(lab):
    client = Client()
    client.force_login(lab.bob)

    page = client.post("/account/tokens/new/", {"name": "notebook", "expires_in_days": ""})
    token = ApiToken.objects.get(user=lab.bob)
    secret = page.context["new_secret"]
    assert page.status_code == 200 and secret in page.content.decode()
    assert secret not in client.get("/account/tokens/").content.decode()

    client.post(f"/account/tokens/{token.pk}/revoke/")

    assert "revoked" in client.get("/account/tokens/").content.decode()
    assert _with_token(secret).get("/api/v1/budget-nodes/").status_code == 401


def test_the_11th_sign_in_after_ten_wrong_passwords_is_locked_out_even_with_the_right_one(lab):
    client = Client()
    for _ in range(9):
        assert client.post("/login/", {"username": "bob", "password": "wrong"}).status_code == 200

    tenth = client.post("/login/", {"username": "bob", "password": "wrong"})
    eleventh = client.post("/login/", {"username": "bob", "password": "pw"})

    assert tenth.status_code == 429 and eleventh.status_code == 429
    assert "Too many failed sign-ins" in eleventh.content.decode()
    assert "_auth_user_id" not in client.session


def test_ten_wrong_passwords_from_one_address_lock_out_other_usernames_too(lab):
    client = Client()
    for index in range(10):
        client.post("/login/", {"username": f"guess{index}", "password": "wrong"})

    assert client.post("/login/", {"username": "alice", "password": "pw"}).status_code == 429


def test_the_token_endpoint_counts_wrong_passwords_and_locks_out_with_a_json_message(lab):
    client = APIClient()
    for _ in range(10):
        client.post("/api/v1/auth/token/", {"username": "bob", "password": "wrong"}, format="json")

    response = client.post("/api/v1/auth/token/", {"username": "bob", "password": "pw"}, format="json")

    assert response.status_code == 429 and "Too many failed sign-ins" in response.json()["detail"]
    assert not ApiToken.objects.exists()


def test_token_requests_are_rate_limited_per_address(lab, monkeypatch):
    monkeypatch.setattr(TokenRequestThrottle, "THROTTLE_RATES", {"token": "3/minute"})
    client = APIClient()
    statuses = [
        client.post("/api/v1/auth/token/", {"username": "bob", "password": "pw"}, format="json").status_code
        for _ in range(4)
    ]

    assert statuses == [201, 201, 201, 429]


@pytest.mark.parametrize("path", ["/account/tokens/", "/api/v1/tokens/"])
def test_signed_out_visitors_cannot_see_tokens(db, path):
    assert Client().get(path).status_code in (302, 401, 403)
