"""The README's examples run as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_quickstart_runs_offline() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == [
        '→ get_weather({"city":"Paris"})',
        "← 14 °C, light rain",
        "It is 14 °C with light rain in Paris.",
        "[completed, usage {}]",
        '→ get_weather({"city":"Lyon"})',
        "← 22 °C, sunny",
        "Lyon is drier: 22 °C and sunny.",
        "[completed, usage {}]",
        "history: 8 messages",
    ]


def test_example_config_and_tools_load() -> None:
    from tests.envs import load

    settings = load(ROOT / "examples" / "toolrelay.toml", env={"OPENAI_API_KEY": "sk-test"})
    assert settings.models and settings.tools
