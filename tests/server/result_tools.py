"""Tools whose results read as errors or not (loaded by path by the server tests)."""

from toolrelay import tool


@tool
def find_city(name: str) -> str:
    """Look a city up; only Paris is known."""
    if name == "Paris":
        return "Errors are rare in Paris: 2.1 million people."
    return f"Error: no city named {name}."


@tool
def quota() -> dict[str, str]:
    """Report the quota (always spent)."""
    return {"error": "quota exceeded"}
