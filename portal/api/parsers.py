"""Request bodies every API endpoint can rely on: a JSON object, with no NUL characters in it.

No endpoint takes a list, a number or ``null`` as its body, and PostgreSQL cannot store a NUL in
text or JSON; refusing both here answers a careless client with a 400 at the door instead of a
500 deep in a view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

NUL = "\x00"


def contains_nul(value: object) -> bool:
    """Is there a NUL character in this string, or in any key or string inside this JSON value?"""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, Mapping):
        return any(contains_nul(key) or contains_nul(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(contains_nul(item) for item in value)
    return False


class ObjectJSONParser(JSONParser):
    """DRF's JSON parser, also refusing a body that is not an object or that holds a NUL."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if not isinstance(data, dict):
            raise ParseError('The body must be a JSON object, e.g. {"name": "vision"}.')
        if contains_nul(data):
            raise ParseError("Text in the body may not contain NUL characters (\\u0000).")
        return data
