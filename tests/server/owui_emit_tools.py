"""
title: Emitting tools
description: Open WebUI-style tools that talk to the chat while they run (tests).
"""

from typing import Any


class Tools:
    async def lookup(self, topic: str, __event_emitter__: Any = None) -> str:
        """
        Look a topic up, telling the chat what happens.
        :param topic: What to look up.
        """
        await __event_emitter__(
            {"type": "status", "data": {"description": f"Searching {topic}", "done": False}}
        )
        await __event_emitter__(
            {
                "type": "citation",
                "data": {
                    "document": [f"All about {topic}."],
                    "metadata": [{"source": f"https://example.org/{topic}"}],
                    "source": {"name": f"{topic} handbook", "url": f"https://example.org/{topic}"},
                },
            }
        )
        await __event_emitter__({"type": "message", "data": {"content": "Found "}})
        await __event_emitter__({"type": "chat:message:delta", "data": {"content": f"{topic}."}})
        await __event_emitter__(
            {
                "type": "files",
                "data": {"files": [{"type": "file", "name": "notes.txt", "url": "/x/notes.txt"}]},
            }
        )
        await __event_emitter__({"type": "status", "data": {"description": "Done", "done": True}})
        return f"{topic}: a noble gas"

    async def rewrite(self, text: str, __event_emitter__: Any = None) -> str:
        """
        Write a draft, then replace it.
        :param text: The final text.
        """
        await __event_emitter__({"type": "message", "data": {"content": "draft"}})
        await __event_emitter__({"type": "replace", "data": {"content": text}})
        await __event_emitter__({"type": "message", "data": {"content": 42}})  # not text: passed on
        return "rewritten"
