"""The signed-in user's API tokens page: list, create (named, optionally expiring), revoke.

Thin: the form parses, ``portal.tokens`` holds the rules. A new token's secret is shown on the
page that answers the creation, once; it is never stored in clear, so it cannot be shown again.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from portal.tokens import MAX_EXPIRY_DAYS, token_is_live, token_issue, token_revoke, tokens_of


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True)
    expires_in_days = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_EXPIRY_DAYS, label="Expires after (days)",
        help_text="Leave empty for a token that does not expire.",
    )  # fmt: skip


@login_required
@require_GET
def tokens_page(request: HttpRequest) -> HttpResponse:
    return _render(request, TokenForm())


@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if form.is_valid():
        try:
            token, secret = token_issue(user=request.user, **form.cleaned_data)
        except ValidationError as error:
            for field, errors in error.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            return _render(request, TokenForm(), new_token=token, new_secret=secret)
    return _render(request, form, status=400)


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    token = token_revoke(user=request.user, token_id=token_id)
    messages.success(request, f"Token {token.name!r} ({token.prefix}…) is revoked.")
    return redirect("tokens")


def _render(request: HttpRequest, form: TokenForm, status: int = 200, **extra: object) -> HttpResponse:
    tokens = [(token, token_is_live(token)) for token in tokens_of(user=request.user)]
    context = {"form": form, "tokens": tokens, **extra}
    return render(request, "portal/pages/tokens.html", context, status=status)
