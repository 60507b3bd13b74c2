"""Code interpreter (SPEC R16): a pluggable runner for `code_interpreter` blocks.

`SubprocessRunner` runs Python code in a fresh interpreter process with a
timeout; it isolates crashes, not hostile code (use a sandboxed runner for
that). A Jupyter runner can implement the same Protocol.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Protocol


class CodeRunner(Protocol):
    async def run(self, code: str, lang: str) -> dict[str, Any]:
        """Run `code`; return `{"stdout", "stderr", "exit_code"}` (and `"error"` on failure)."""
        ...


class SubprocessRunner:
    def __init__(self, *, timeout: float = 30.0, python: str = sys.executable) -> None:
        self.timeout = timeout
        self.python = python

    async def run(self, code: str, lang: str) -> dict[str, Any]:
        if lang.lower() not in ("python", "py", "python3"):
            return {
                "stdout": "",
                "stderr": "",
                "exit_code": None,
                "error": f"Unsupported language: {lang}",
            }
        proc = await asyncio.create_subprocess_exec(
            self.python,
            "-I",
            "-c",
            code,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return {
                "stdout": "",
                "stderr": "",
                "exit_code": None,
                "error": f"Execution timed out after {self.timeout:g} s.",
            }
        except asyncio.CancelledError:
            proc.kill()
            await proc.wait()
            raise
        return {
            "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace"),
            "exit_code": proc.returncode,
        }
