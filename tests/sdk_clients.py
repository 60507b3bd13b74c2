"""Official `openai` SDK clients for tests, closed after every test.

An SDK client left open keeps its sockets until garbage collection, and the
ResourceWarning then lands in whichever later test happens to be running
(warnings are errors here): a flaky failure far from its cause.
"""

from __future__ import annotations

from typing import Any

import openai

_OPEN: list[openai.OpenAI] = []


def openai_client(**options: Any) -> openai.OpenAI:
    client = openai.OpenAI(**options)
    _OPEN.append(client)
    return client


def close_all() -> None:
    while _OPEN:
        _OPEN.pop().close()
