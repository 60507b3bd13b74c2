"""
title: Web Notes
author: community-style example
version: 1.0.0
requirements:
"""

import json
from datetime import datetime


class Tools:
    def __init__(self):
        self.citation = True

    def save_note(self, text: str, __metadata__: dict = None, __id__: str = None) -> str:
        """
        Save a short note for this chat.
        :param text: The note.
        """
        chat = (__metadata__ or {}).get("chat_id", "?")
        return json.dumps({"saved": text, "chat": chat, "tool": __id__})

    async def cite_page(self, url: str, __event_emitter__=None) -> str:
        """
        Quote a web page and cite it.
        :param url: The page address.
        """
        await __event_emitter__(
            {
                "type": "citation",
                "data": {
                    "document": [f"Contents of {url}"],
                    "metadata": [{"date_accessed": datetime(2024, 1, 1).isoformat(), "source": url}],
                    "source": {"name": url, "url": url},
                },
            }
        )
        await __event_emitter__({"type": "message", "data": {"content": f"Read {url}\n"}})
        return f"Quoted {url}"
