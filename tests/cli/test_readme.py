"""The README's "Your model, your tools" lines run as written (against a fake model server)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.patience import HANG
from toolrelay.testing import FakeModelServer, SSEReply, ToolCallSpec
from toolrelay.testing.wire import chat_chunks

ROOT = Path(__file__).parent.parent.parent
OLLAMA = "http://localhost:11434/v1"


def readme_lines() -> list[str]:
    """The shell lines of the section, comments dropped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your model, your tools\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines()]


def test_the_five_lines(tmp_path: Path) -> None:
    lines = readme_lines()
    assert len(lines) == 5 and lines[0] == "source .venv/bin/activate"
    assert lines[-1] == "toolrelay serve"  # runs until stopped: not run here
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "examples" / "tools.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OLLAMA_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # .venv/bin
    with FakeModelServer() as server:
        server.script(
            SSEReply(chat_chunks(tool_calls=[ToolCallSpec("calculator", {"expression": "17*23"})])),
            SSEReply(chat_chunks(text="17*23 = 391")),
        )
        script = "\n".join(["set -e", *lines[1:4], "toolrelay tools list"])
        done = subprocess.run(
            ["bash", "-c", script.replace(OLLAMA, server.base_url)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG * 4,
        )
    assert done.returncode == 0, done.stderr
    answer, *table = done.stdout.splitlines()
    assert answer == "17*23 = 391"
    first = server.requests[0].json
    assert first["model"] == "qwen3"
    assert {t["function"]["name"] for t in first["tools"]} == {
        "get_time",
        "calculator",
        "get_weather",
    }
    assert server.requests[1].json["messages"][-1]["content"] == "391"
    assert (tmp_path / "toolrelay.toml").read_text() == 'tools = ["examples/tools.py"]\n'
    listed = "\n".join(table)
    assert all(name in listed for name in ("get_time", "calculator", "get_weather"))
