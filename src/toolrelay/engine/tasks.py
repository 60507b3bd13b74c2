"""Background tasks after the answer (SPEC R20): follow-ups, title, tags.

They run on the task model with the conversation as plain text (tool-call
visualisations, reasoning and images stripped). A failing task is dropped:
it never fails the turn.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from toolrelay.core.body import BodyReader
from toolrelay.core.items import Item, output_text
from toolrelay.engine.interfaces import Message, ModelClient, ModelRequest

log = logging.getLogger(__name__)

_DETAILS = re.compile(r"<details[^>]*>.*?</details>", re.S)
_MD_IMAGE = re.compile(r"!\[[^\]]*\]\(data:[^)]*\)")
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)

PROMPTS = {
    "title": (
        "Write a concise title (3-5 words, no quotes) for this chat. Reply with JSON only: "
        '{"title": "..."}'
    ),
    "tags": ('Give 1-3 broad topic tags for this chat. Reply with JSON only: {"tags": ["..."]}'),
    "follow_ups": (
        "Suggest 3 short follow-up questions the user might ask next. Reply with JSON only: "
        '{"follow_ups": ["..."]}'
    ),
}


@dataclass(frozen=True, slots=True)
class TaskResults:
    title: str | None = None
    tags: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()


def plain_text(value: Any) -> str:
    """A message's text with images, tool-call blocks and data URIs removed."""
    if isinstance(value, list):
        value = "\n".join(
            str(p.get("text", "")) for p in value if isinstance(p, dict) and "text" in p
        )
    text = str(value or "")
    return _MD_IMAGE.sub("", _DETAILS.sub("", text)).strip()


def conversation_text(messages: Sequence[Message], output: Sequence[Item]) -> str:
    lines = []
    for m in messages:
        if m.get("role") in ("user", "assistant") and (text := plain_text(m.get("content"))):
            lines.append(f"{m['role'].upper()}: {text}")
    if answer := plain_text(output_text(list(output))):
        lines.append(f"ASSISTANT: {answer}")
    return "\n".join(lines)


async def run_tasks(
    model: ModelClient,
    messages: Sequence[Message],
    output: Sequence[Item],
    *,
    wanted: Sequence[str] = ("title", "tags", "follow_ups"),
) -> TaskResults:
    chat = conversation_text(messages, output)
    names = [w for w in wanted if w in PROMPTS]
    answers = await asyncio.gather(*(_ask(model, PROMPTS[n], chat) for n in names))
    found: dict[str, Any] = {}
    for name, answer in zip(names, answers, strict=True):
        value = answer.get(name) if answer else None
        if name == "title" and isinstance(value, str) and value.strip():
            found["title"] = value.strip()[:200]
        elif name != "title" and isinstance(value, list):
            found[name] = tuple(str(v).strip() for v in value if str(v).strip())[:10]
    return TaskResults(**found)


async def _ask(model: ModelClient, prompt: str, chat: str) -> Mapping[str, Any] | None:
    request = ModelRequest(
        messages=[
            {"role": "system", "content": prompt},
            {"role": "user", "content": f"<chat>\n{chat}\n</chat>"},
        ]
    )
    try:
        stream = await model.open(request)
        reader = BodyReader(stream.format)
        try:
            async for chunk in stream:
                reader.feed(chunk)
        finally:
            await stream.aclose()
        reader.finish()
        text = output_text(reader.result().output)
        match = _JSON_OBJECT.search(text)
        parsed = orjson.loads(match.group(0)) if match else None
        return parsed if isinstance(parsed, dict) else None
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a background task never fails the turn
        log.warning("background task failed: %s", exc)
        return None
