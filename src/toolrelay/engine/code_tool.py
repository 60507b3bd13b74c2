"""`execute_code`: the code interpreter as a native tool any tool-calling model can use.

Built per turn by `Relay` when the code-interpreter gates are open (the same
five as the inline `<code_interpreter>` tag path, SPEC R5), on the same
`CodeRunner`, so both forms share one kernel per chat, and the same
`CodeBudget`: runs per turn of both forms together are capped
(`RunLimits.interpreter_retries`, R16); one more call gets an error result
that says so. Output is streamed as `code_interpreter:output` events
naming the call; the result gives the model text plus PNG images (R12), the
client image files and HTML embeds.
"""

from __future__ import annotations

from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.tools.results import NormalisedResult, is_model_image
from toolrelay.engine.interfaces import ToolContext, ToolSpec
from toolrelay.engine.interpreter import CodeBudget, CodeJob, CodeRunner, code_session

__all__ = ["CODE_TOOL_DESCRIPTION", "CODE_TOOL_NAME", "CodeTool", "result_text"]

CODE_TOOL_NAME = "execute_code"
CODE_TOOL_DESCRIPTION = (
    "Run Python code in a Jupyter kernel kept for this chat: variables, imports and files "
    "persist between calls. Returns stdout, stderr, the value of the last expression and "
    "any error; images shown (matplotlib) come back as images. Files are written to the "
    "current directory."
)
_PARAMETERS = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "The Python code to run."},
        "timeout": {
            "type": "number",
            "description": "Seconds before the run is interrupted (optional).",
        },
    },
    "required": ["code"],
}


class CodeTool:
    """The `execute_code` tool of one turn (its run count is this turn's)."""

    def __init__(self, runner: CodeRunner, *, budget: CodeBudget | None = None) -> None:
        """`budget` is the turn's (shared with the inline tag path); default 5 runs."""
        self.runner = runner
        self.budget = budget if budget is not None else CodeBudget(5)
        limit = getattr(runner, "max_timeout", None)
        self._spec = ToolSpec(
            name=CODE_TOOL_NAME,
            description=CODE_TOOL_DESCRIPTION,
            parameters=_PARAMETERS,
            timeout=float(limit) + 30.0 if isinstance(limit, int | float) else None,
            sequential=True,
        )

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> NormalisedResult:
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return NormalisedResult("Error: `code` must be a non-empty string of Python.")
        if not self.budget.take():
            return NormalisedResult(
                f"Error: the code interpreter already ran {self.budget.limit} times in this "
                "turn (the limit); answer with what you have."
            )
        timeout = arguments.get("timeout")
        job = CodeJob(
            session=code_session(context.chat_id, context.user),
            call_id=context.call_id,
            timeout=float(timeout) if isinstance(timeout, int | float) and timeout > 0 else None,
            on_output=_live(context),
        )
        output = await self.runner.run(code, "python", job)
        return _normalised(output)


def _live(context: ToolContext) -> Any:
    emit = context.event_emitter
    if emit is None:
        return None

    async def on_output(data: dict[str, Any]) -> None:
        await emit({"type": ev.CODE_OUTPUT, "data": {"call_id": context.call_id, **data}})

    return on_output


def result_text(output: dict[str, Any]) -> str:
    """What the model reads of a run: each non-empty part under its name."""
    parts = []
    for key in ("stdout", "stderr", "result"):
        value = output.get(key)
        if value:
            parts.append(f"{key}:\n{str(value).rstrip()}")
    if output.get("error") and not output.get("stderr"):
        parts.append(f"error: {output['error']}")
    names = [f.get("name") for f in output.get("files", ()) if f.get("name")]
    if names:
        parts.append("files shown: " + ", ".join(str(n) for n in names))
    return "\n\n".join(parts) or "(no output)"


def _normalised(output: dict[str, Any]) -> NormalisedResult:
    files = []
    for entry in output.get("files", ()):
        url = entry.get("url")
        if isinstance(url, str):
            shown = {"type": "image", "url": url, "name": entry.get("name")}
            if not is_model_image(url):  # SVG: the client shows it, the model cannot read it
                shown["type"] = "file"
                shown["mime_type"] = entry.get("mime_type")
            files.append(shown)
    embeds = tuple(output.get("embeds", ()))
    return NormalisedResult(result_text(output), files=tuple(files), embeds=embeds)
