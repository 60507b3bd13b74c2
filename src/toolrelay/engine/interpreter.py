"""Code interpreter (SPEC R16): a pluggable runner for `code_interpreter` blocks and `execute_code`.

A `CodeRunner` runs one piece of code and returns its output as a dict
(`stdout`, `stderr`, `result`, and `error` when it failed; `files` and
`embeds` for rich output). The `CodeJob` says whose code it is (`session`:
the chat, so a runner can keep one kernel per chat), which call or block it
belongs to (`call_id`, named by live events), its timeout, and where live
output goes (`on_output`). Cancelling `run` must stop the code.

`SubprocessRunner` runs Python code in a fresh interpreter process with a
timeout; it isolates crashes, not hostile code. `toolrelay.adapters.code`
has `JupyterRunner` (a kernel per chat, sandboxed) and a sandboxed
subprocess runner.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "CodeBudget",
    "CodeJob",
    "CodeRunner",
    "SubprocessRunner",
    "code_output",
    "code_session",
    "without_code_images",
]

OutputCallback = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CodeJob:
    """Who runs the code and where its live output goes (all optional)."""

    session: str | None = None
    """The chat: runs of one session share state where the runner keeps any."""
    call_id: str | None = None
    """The `execute_code` call or the `code_interpreter` block the run belongs to."""
    timeout: float | None = None
    """Seconds for this run; None is the runner's default (a runner may cap it)."""
    on_output: OutputCallback | None = None
    """Called with each piece of output as it appears (`{"kind": "stdout", "text": …}` …)."""


def code_session(chat_id: str | None, user: Mapping[str, Any] | None) -> str | None:
    """Whose kernel a run uses: the chat's; without a chat (a stateless `/v1` request) the
    user's own, so users never share one; None (the runner's default) for neither."""
    if chat_id:
        return chat_id
    if user is not None and user.get("id"):
        return f"user-{user['id']}"
    return None


@dataclass(slots=True)
class CodeBudget:
    """Code runs one turn may still make (R16), shared by the inline tag and `execute_code`."""

    limit: int
    used: int = 0

    def take(self) -> bool:
        """Count one run; False (and nothing counted) when the limit is reached."""
        if self.used >= self.limit:
            return False
        self.used += 1
        return True


class CodeRunner(Protocol):
    async def run(self, code: str, lang: str, job: CodeJob | None = None) -> dict[str, Any]:
        """Run `code`; return `{"stdout", "stderr", …}` (and `"error"` on failure)."""
        ...


def code_output(result: dict[str, Any]) -> dict[str, Any]:
    """A run's result as the client and the store see a `code_interpreter` item: files by
    name, no image data (the client downloads them from the chat; the saved turn stays
    small). Within the turn the item keeps the data URIs: the model sees the images (R12)."""
    files = result.get("files")
    if not isinstance(files, list):
        return result
    kept = [{k: v for k, v in f.items() if k != "url"} for f in files if isinstance(f, dict)]
    return {**result, "files": kept}


def without_code_images(items: list[Any]) -> list[Any]:
    """The turn's items as they are saved and answered: `code_output` applied to every
    `code_interpreter` item whose output still holds image data (the same list if none)."""
    if not any(_has_images(i) for i in items):
        return items
    return [{**i, "output": code_output(i["output"])} if _has_images(i) else i for i in items]


def _has_images(item: Any) -> bool:
    if not isinstance(item, dict) or item.get("type") != "code_interpreter":
        return False
    output = item.get("output")
    files = output.get("files") if isinstance(output, dict) else None
    return isinstance(files, list) and any(isinstance(f, dict) and "url" in f for f in files)


class SubprocessRunner:
    def __init__(
        self,
        *,
        timeout: float = 30.0,
        python: str = sys.executable,
        prefix: Callable[[CodeJob], Awaitable[tuple[list[str], dict[str, Any]]]] | None = None,
    ) -> None:
        """`prefix` (for sandboxes) gives a job's command prefix and extra `Popen` arguments."""
        self.timeout = timeout
        self.python = python
        self.prefix = prefix

    async def run(self, code: str, lang: str, job: CodeJob | None = None) -> dict[str, Any]:
        if lang.lower() not in ("python", "py", "python3"):
            return {
                "stdout": "",
                "stderr": "",
                "exit_code": None,
                "error": f"Unsupported language: {lang}",
            }
        job = job or CodeJob()
        timeout = self.timeout if job.timeout is None else min(job.timeout, self.timeout)
        prefix, extra = await self.prefix(job) if self.prefix is not None else ([], {})
        proc = await asyncio.create_subprocess_exec(
            *prefix,
            self.python,
            "-I",
            "-c",
            code,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            **extra,
        )
        try:
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return {
                "stdout": "",
                "stderr": "",
                "exit_code": None,
                "error": f"Execution timed out after {timeout:g} s.",
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
