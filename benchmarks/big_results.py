"""What one big tool result costs the turns after it (issue 31, item 4).

A chat (SQLite store) has one earlier turn whose tool returned 1 KB, or 10 MB. The
measured turn is the next one, as the server runs it: load the chat's history from
the store, then an answer-only `Relay.run` through the real `OpenAIChat` client (the
request is serialised and sent to an in-process `toolrelay.testing.MockTransport`, which
answers at once). CPU time of the whole process (the store's thread included),
best of several. Three trees of the same run: the 1 KB baseline, 10 MB with the
default cap (100 KB reach the model), and 10 MB with the cap off (the old
behaviour). Target: 10 MB with the cap ≤ 1.1× the baseline.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from toolrelay import OpenAIChat, Relay, RunLimits, tool
from toolrelay.adapters.http import Request
from toolrelay.adapters.models import HTTPOptions
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.testing import MockResponse, MockTransport
from toolrelay.testing.scripted_model import reply

ANSWER = reply(["It ", "is ", "done."])


def _transport(first: bytes) -> MockTransport:
    """The first request gets `first` (the tool call), every later one the answer."""
    served = [first]

    async def handler(request: Request) -> MockResponse:
        body = served.pop() if served else ANSWER

        async def stream() -> AsyncIterator[bytes]:
            yield body

        return MockResponse(200, {"content-type": "text/event-stream"}, stream())

    return MockTransport(handler)


async def next_turn_cpu(folder: Path, size: int, cap: int, repeat: int) -> float:
    store = await SQLStore.open(f"sqlite+aiosqlite:///{folder / f'big_{size}_{cap}.db'}")
    payload = ("0123456789abcdef" * (size // 16 + 1))[:size]

    @tool
    def fetch() -> str:
        """Fetches a document."""
        return payload

    model = OpenAIChat(
        base_url="http://fake",
        model="m",
        http=HTTPOptions(transport=_transport(reply(calls=[("fetch", {})]))),
    )
    limits = RunLimits(tool_result_max_bytes=cap)
    relay = Relay(model, [fetch], store=store, limits=limits)
    try:
        user = await store.create_user("u")
        chat = await store.create_chat(user.id)
        await store.add_message(chat.id, {"role": "user", "content": "fetch it"})
        await relay.run("fetch it", chat_id=chat.id, message_id="msg_first")
        best = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            history = await store.load_messages(chat.id)
            result = await relay.run([*history, {"role": "user", "content": "and?"}])
            best = min(best, time.process_time() - start)
            assert result.text == "It is done.", (result.status, result.error)
        return best
    finally:
        await relay.aclose()
        await store.close()


def run(quick: bool = False) -> None:
    repeat = 5 if quick else 30
    cases = {
        "1 KB result": (1_000, 100_000),
        "10 MB, capped (default)": (10_000_000, 100_000),
        "10 MB, no cap": (10_000_000, 0),
    }
    with tempfile.TemporaryDirectory() as tmp:
        cpu = {
            name: asyncio.run(next_turn_cpu(Path(tmp), size, cap, repeat))
            for name, (size, cap) in cases.items()
        }
    base = cpu["1 KB result"]
    print(f"\nbig tool results: CPU of the next turn (load + run), best of {repeat}")
    print(f"{'earlier result':<24} {'ms':>8} {'× 1 KB':>8}")
    for name, seconds in cpu.items():
        print(f"{name:<24} {seconds * 1e3:>8.2f} {seconds / base:>8.2f}")
    print("target: 10 MB capped ≤ 1.1× the 1 KB turn")


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
