"""Example tools for `toolrelay serve`: list this file under `tools` in toolrelay.toml.

Each function decorated with `@tool` becomes a tool; its docstring and type
hints become the description and JSON schema the model sees. The server and
`toolrelay chat` also offer the built-in `get_time` and `calculator`
(`builtin_tools`); a tool defined here with one of their names replaces it.
"""

from __future__ import annotations

from toolrelay import tool

_WEATHER = {
    "paris": ("light rain", 14),
    "london": ("overcast", 12),
    "tokyo": ("clear", 22),
    "new york": ("sunny", 18),
}


@tool
def get_weather(city: str) -> dict[str, object]:
    """Get the current weather for a city (fake data, for demos).

    Args:
        city: The city name, e.g. "Paris".
    """
    conditions, celsius = _WEATHER.get(city.strip().lower(), ("partly cloudy", 20))
    return {"city": city, "conditions": conditions, "temperature_c": celsius}
