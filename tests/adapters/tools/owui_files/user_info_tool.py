"""
title: User Info
author: community-style example
version: 0.1.0
"""

from pydantic import BaseModel


class Tools:
    class Valves(BaseModel):
        greeting: str = "Hello"

    def __init__(self):
        self.valves = self.Valves()

    def whoami(
        self,
        __user__: dict = {},
        __model__: dict = None,
        __request__=None,
        __oauth_token__=None,
        __files__: list = None,
    ) -> str:
        """Tell the user who they are."""
        return (
            f"{self.valves.greeting}, {__user__.get('name', 'stranger')} <{__user__.get('email', '')}>;"
            f" files={len(__files__ or [])}; oauth={__oauth_token__}; request={__request__}"
        )

    async def confirm(self, question: str, __event_call__=None) -> str:
        """
        Ask the user to confirm something.
        :param question: What to ask.
        """
        answer = await __event_call__(
            {"type": "confirmation", "data": {"title": "Confirm", "message": question}}
        )
        return "confirmed" if answer else "declined"

    async def notify(self, text: str, __event_emitter__=None) -> str:
        """
        Show a toast.
        :param text: What to show.
        """
        await __event_emitter__({"type": "notification", "data": {"type": "info", "content": text}})
        return "shown"
