"""A server-side tool that asks the client something through `__event_call__`."""

from typing import Any

from toolrelay import tool


@tool
async def ask_name(__event_call__: Any) -> str:
    """Ask the user for their name."""
    answer = await __event_call__({"type": "input", "data": {"title": "Your name?"}})
    return f"Hello, {answer}!"
