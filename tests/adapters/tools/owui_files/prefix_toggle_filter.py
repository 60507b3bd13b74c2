"""
title: Polite Prefix
author: community-style example
version: 0.1.0
"""

from pydantic import BaseModel


class Filter:
    class Valves(BaseModel):
        priority: int = 1
        prefix: str = "Please answer politely."

    def __init__(self):
        self.valves = self.Valves()
        self.toggle = True
        self.icon = "data:image/svg+xml;base64,PHN2Zy8+"

    async def inlet(self, body: dict, __user__: dict = None, __metadata__: dict = None) -> dict:
        body["messages"] = [{"role": "system", "content": self.valves.prefix}] + body["messages"]
        return body
