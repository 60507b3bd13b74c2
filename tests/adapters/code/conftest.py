"""Real Jupyter kernels, shared per test module where the tests do not disturb each other."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"
