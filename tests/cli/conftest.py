"""Every CLI test gets its own data directory and no model settings from the environment.

`toolrelay chat` saves conversations under the data directory: without this a
test would write into the home directory of whoever runs the suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_PREFIXES = ("TOOLRELAY_", "OPENAI_", "OLLAMA_")
_NAMES = ("DATABASE_URL", "REDIS_URL", "CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS")


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The data directory of this test (not created: commands create it when they must)."""
    for name in list(os.environ):
        if name.startswith(_PREFIXES) or name in _NAMES:
            monkeypatch.delenv(name)
    path = tmp_path / "data"
    monkeypatch.setenv("TOOLRELAY_DATA_DIR", str(path))
    monkeypatch.chdir(tmp_path)
    return path
