"""The Python API in one file: `python examples/quickstart.py`.

With OPENAI_BASE_URL (and OPENAI_API_KEY, OPENAI_MODEL) set it talks to that
server; without, it plays a scripted model, so it runs anywhere.
"""

from __future__ import annotations

import asyncio
import os

from toolrelay import OpenAIChat, Relay, RunLimits, tool
from toolrelay.testing import ScriptedModel, reply


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    return {"paris": "14 °C, light rain"}.get(city.lower(), "22 °C, sunny")


def model() -> OpenAIChat | ScriptedModel:
    if base_url := os.environ.get("OPENAI_BASE_URL"):
        return OpenAIChat(
            base_url=base_url,
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            api_key=os.environ.get("OPENAI_API_KEY"),
        )
    return ScriptedModel(
        reply(calls=[("get_weather", {"city": "Paris"})]),
        reply("It is 14 °C with light rain in Paris."),
        reply(calls=[("get_weather", {"city": "Lyon"})]),
        reply("Lyon is drier: 22 °C and sunny."),
    )


async def main() -> None:
    async with Relay(model(), [get_weather], limits=RunLimits(max_iterations=8)) as relay:
        chat = relay.chat()  # a conversation: each turn sees the ones before
        for question in ("What's the weather in Paris?", "And in Lyon?"):
            async for event in chat.stream(question):
                if event.type == "response.output_item.done":
                    item = event.data["item"]
                    if item["type"] == "function_call":
                        print(f"→ {item['name']}({item['arguments']})")
                    elif item["type"] == "function_call_output":
                        print(f"← {item['output']}")
                elif event.type == "chat:completion" and event.data.get("done"):
                    print(event.data["content"])
                    print(f"[{event.data['status']}, usage {event.data['usage']}]")
        print(f"history: {len(chat.messages)} messages")


if __name__ == "__main__":
    asyncio.run(main())
