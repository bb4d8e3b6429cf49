"""``?limit=`` and ``?offset=``: bounded, and a 400 naming the parameter when out of range."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_OFFSET = 2**31 - 1  # far past any list here; beyond it the database's integers would overflow
T = TypeVar("T", int, int | None)  # what DRF's parser returns: an offset, or a limit (None: no limit)


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = 1000

    def get_limit(self, request: Request) -> int | None:
        return self._bounded(request, self.limit_query_param, 1, self.max_limit, super().get_limit)

    def get_offset(self, request: Request) -> int:
        return self._bounded(request, self.offset_query_param, 0, MAX_OFFSET, super().get_offset)

    @staticmethod
    def _bounded(request: Request, name: str, low: int, high: int | None, parse: Callable[[Request], T]) -> T:
        raw = request.query_params.get(name)
        if raw is not None and raw != "":
            try:
                value = int(raw)
            except ValueError:
                raise ValidationError({name: ["Give a whole number."]}) from None
            if value < low or (name == "offset" and high is not None and value > high):
                raise ValidationError({name: [f"Give a whole number from {low} to {high}."]})
        return parse(request)
