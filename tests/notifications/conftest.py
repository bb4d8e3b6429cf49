from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.scheduling.conftest import build_lab


@pytest.fixture
def lab(db) -> SimpleNamespace:  # noqa: ANN001
    return build_lab()
