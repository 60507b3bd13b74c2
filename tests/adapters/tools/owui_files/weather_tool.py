"""
title: Weather Lookup
author: community-style example
version: 0.2.1
license: MIT
requirements: pydantic
description: Current weather for a city, with units from valves.
"""

from typing import Awaitable, Callable, Optional

from pydantic import BaseModel, Field


class Tools:
    class Valves(BaseModel):
        units: str = Field(default="metric", description="metric or imperial")
        api_key: str = Field(default="", description="Weather service key")

    class UserValves(BaseModel):
        city_alias: str = Field(default="", description="What you call your home town")

    def __init__(self):
        self.valves = self.Valves()
        self.citation = False

    async def get_weather(
        self,
        city: str,
        __user__: Optional[dict] = None,
        __event_emitter__: Optional[Callable[[dict], Awaitable[None]]] = None,
    ) -> str:
        """
        Get the current weather for a city.
        :param city: The city name, e.g. "Oslo".
        :return: A one-line report.
        """
        if __event_emitter__:
            await __event_emitter__(
                {"type": "status", "data": {"description": f"Looking up {city}", "done": False}}
            )
        alias = ""
        if __user__ and __user__.get("valves") and __user__["valves"].city_alias:
            alias = f" ({__user__['valves'].city_alias})"
        degrees = "21°C" if self.valves.units == "metric" else "70°F"
        if __event_emitter__:
            await __event_emitter__({"type": "status", "data": {"description": "Done", "done": True}})
        return f"{city}{alias}: sunny, {degrees}, key={'set' if self.valves.api_key else 'none'}"
