"""The HTTP side: one session with the token, and every failure turned into an exit code.

Errors carry the server's own words: DRF's ``detail``, or each field's messages as ``field: message``.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import requests

TIMEOUT_S = 30.0


class ExitCode(enum.IntEnum):
    """What ``gpus`` exits with (docs/cli.md lists them for scripts)."""

    OK = 0
    REFUSED = 1  # the server refused the request as given (400: a field error)
    USAGE = 2  # the command line itself was wrong (click's own code)
    NOT_AUTHENTICATED = 3  # no token, or the server did not accept it (401)
    FORBIDDEN = 4  # signed in, but not allowed (403)
    NOT_FOUND = 5  # no such workload, budget node or cluster (404)
    CONFLICT = 6  # the workload's state does not allow it, e.g. cancelling finished work (409)
    SERVER_ERROR = 7  # the server failed (5xx)
    UNREACHABLE = 8  # no answer: wrong URL, server down, timeout


STATUS_EXIT = {400: ExitCode.REFUSED, 401: ExitCode.NOT_AUTHENTICATED, 403: ExitCode.FORBIDDEN,
               404: ExitCode.NOT_FOUND, 409: ExitCode.CONFLICT}  # fmt: skip


class ApiError(Exception):
    def __init__(self, message: str, code: ExitCode, status: int | None = None) -> None:
        super().__init__(message)
        self.message, self.code, self.status = message, code, status


def exit_code_for(status: int) -> ExitCode:
    if status >= 500:
        return ExitCode.SERVER_ERROR
    return STATUS_EXIT.get(status, ExitCode.REFUSED)


def server_words(body: object) -> str:
    """The server's message: ``detail``, else ``field: message`` per field, else the body itself."""
    if isinstance(body, dict):
        if set(body) == {"detail"}:
            return str(body["detail"])
        return "; ".join(f"{field}: {_joined(messages)}" for field, messages in body.items())
    if isinstance(body, list):
        return _joined(body)
    return str(body)


def _joined(messages: object) -> str:
    if isinstance(messages, list):
        return " ".join(str(message) for message in messages)
    if isinstance(messages, dict):
        return server_words(messages)
    return str(messages)


def _text_of(response: requests.Response) -> str:
    """A non-JSON body (an HTML error page) as its text: tags dropped, whitespace folded, cut short."""
    text = re.sub(r"<(script|style|title)\b.*?</\1>", " ", response.text, flags=re.S | re.I)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)).strip()
    return text[:300] or response.reason or "no message"


class Api:
    """``/api/v1/`` of one portal, as one user (the token)."""

    def __init__(self, url: str, token: str = "") -> None:
        self.base = url.rstrip("/") + "/api/v1/"
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def get(self, path: str, **params: object) -> Any:
        clean = {key: value for key, value in params.items() if value not in (None, "", False)}
        return self.request("GET", path, params=clean)

    def post(self, path: str, body: dict | None = None) -> Any:
        return self.request("POST", path, json=body or {})

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.session.request(method, self.base + path, timeout=TIMEOUT_S, **kwargs)
        except requests.RequestException as error:
            raise ApiError(f"cannot reach {self.base}: {error}", ExitCode.UNREACHABLE) from None
        if response.ok:
            return response.json() if response.content else None
        raise ApiError(self._message(response), exit_code_for(response.status_code), response.status_code)

    @staticmethod
    def _message(response: requests.Response) -> str:
        try:
            words = server_words(response.json())
        except ValueError:
            words = _text_of(response)
        if response.status_code >= 500:
            return f"the server failed (HTTP {response.status_code}): {words}"
        return words
