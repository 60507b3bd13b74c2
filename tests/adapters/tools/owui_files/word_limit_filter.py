"""
title: Word Limit
author: community-style example
version: 0.3.0
"""

from typing import Optional

from pydantic import BaseModel, Field


class Filter:
    class Valves(BaseModel):
        priority: int = Field(default=5, description="Filter order")
        max_words: int = 50

    class UserValves(BaseModel):
        shout: bool = False

    def __init__(self):
        self.valves = self.Valves()

    def inlet(self, body: dict, __user__: Optional[dict] = None) -> dict:
        messages = body.get("messages", [])
        if messages and messages[-1].get("role") == "user":
            words = messages[-1]["content"].split()
            text = " ".join(words[: self.valves.max_words])
            if __user__ and __user__.get("valves") and __user__["valves"].shout:
                text = text.upper()
            messages[-1]["content"] = text
        return body

    def stream(self, event: dict) -> dict:
        for choice in event.get("choices", []):
            delta = choice.get("delta") or {}
            if delta.get("content"):
                delta["content"] = delta["content"].replace("darn", "d**n")
        return event

    def outlet(self, body: dict, __user__: Optional[dict] = None) -> dict:
        for message in body.get("messages", []):
            if message.get("role") == "assistant":
                message["content"] = message["content"].rstrip() + " [checked]"
        return body
