"""Server-side tools the server tests configure (loaded from this file by path)."""

from toolrelay import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case some text."""
    return text.upper()
