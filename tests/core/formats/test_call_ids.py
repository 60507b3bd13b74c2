"""Issue 8 items 1-2: every call pairs with its own output; text between calls is kept.

Kimi (Moonshot) numbers its call ids `functions.<name>:<n>` and restarts in
each round, so round 2 reuses round 1's ids; a reused id must get a fresh one
when it is accumulated, or the replayed results swap between calls.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from toolrelay.core.formats.transcript import to_chat_messages, used_call_ids
from toolrelay.core.items import Item, function_call_output_item, is_call, raw_items
from toolrelay.core.stream.reader import read_body

MINTED = re.compile(r"^call_[0-9a-f]{24}$")


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-kimi",
        "object": "chat.completion.chunk",
        "model": "kimi-k2.5",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def sse(*chunks: dict[str, Any]) -> bytes:
    frames = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks)
    return frames + b"data: [DONE]\n\n"


def kimi_call(index: int, call_id: str, city: str) -> dict[str, Any]:
    function = {"name": "weather", "arguments": orjson.dumps({"city": city}).decode()}
    return chunk(
        {"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]}
    )


def answer(output: list[Item], city_results: dict[str, str]) -> list[Item]:
    """The tool results of a round, one per call, found by the call's arguments."""
    results: list[Item] = []
    for item in output:
        if is_call(item):
            city = orjson.loads(item["arguments"])["city"]
            results.append(function_call_output_item(item["call_id"], city_results[city]))
    return results


def pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(city asked, result given) for every replayed call, matched by tool_call_id."""
    asked: dict[str, list[str]] = {}
    found: list[tuple[str, str]] = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            asked.setdefault(call["id"], []).append(
                orjson.loads(call["function"]["arguments"])["city"]
            )
        if message["role"] == "tool":
            (city,) = asked[message["tool_call_id"]]  # exactly one call per id
            found.append((city, message["content"]))
    return found


def test_ids_reused_across_rounds_keep_each_result_with_its_call() -> None:
    round1, _ = read_body(
        sse(kimi_call(0, "functions.weather:0", "Paris"), chunk({}, "tool_calls"))
    )
    output = round1.output + answer(round1.output, {"Paris": "rain in Paris"})
    round2, _ = read_body(
        sse(kimi_call(0, "functions.weather:0", "Rome"), chunk({}, "tool_calls")),
        call_ids=used_call_ids([], output),
    )
    assert raw_items(round1.output)[0]["call_id"] == "functions.weather:0"  # a free id is kept
    assert MINTED.match(raw_items(round2.output)[0]["call_id"])
    output += round2.output + answer(round2.output, {"Rome": "sunny in Rome"})
    assert pairs(to_chat_messages(output)) == [
        ("Paris", "rain in Paris"),
        ("Rome", "sunny in Rome"),
    ]


def test_ids_reused_within_a_round_are_made_unique() -> None:
    body = sse(
        kimi_call(0, "functions.weather:0", "Paris"),
        kimi_call(1, "functions.weather:0", "Rome"),
        chunk({}, "tool_calls"),
    )
    read, _ = read_body(body)
    calls = [i for i in read.output if is_call(i)]
    assert [orjson.loads(c["arguments"])["city"] for c in calls] == ["Paris", "Rome"]
    assert calls[0]["call_id"] == "functions.weather:0" and MINTED.match(calls[1]["call_id"])
    output = read.output + answer(read.output, {"Paris": "rain", "Rome": "sun"})
    assert pairs(to_chat_messages(output)) == [("Paris", "rain"), ("Rome", "sun")]


def test_ids_in_the_history_are_not_reused() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "functions.weather:0", "type": "function", "function": {}}],
        },
        {"role": "tool", "tool_call_id": "functions.weather:0", "content": "rain"},
    ]
    read, _ = read_body(
        sse(kimi_call(0, "functions.weather:0", "Rome"), chunk({}, "tool_calls")),
        call_ids=used_call_ids(history, []),
    )
    assert MINTED.match(raw_items(read.output)[0]["call_id"])


def test_responses_api_calls_with_reused_ids_are_made_unique() -> None:
    def fc(call_id: str, city: str) -> dict[str, Any]:
        args = orjson.dumps({"city": city}).decode()
        return {
            "type": "function_call",
            "id": f"fc_{city}",
            "call_id": call_id,
            "name": "weather",
            "arguments": args,
            "status": "completed",
        }

    body = orjson.dumps(
        {
            "object": "response",
            "status": "completed",
            "output": [fc("c1", "Paris"), fc("c1", "Rome")],
        }
    )
    read, _ = read_body(body, call_ids={"c0"})
    ids = [i["call_id"] for i in raw_items(read.output)]
    assert ids[0] == "c1" and MINTED.match(ids[1])


def test_text_between_parallel_calls_is_kept_in_order() -> None:
    """Kimi K2.5 sends `content: " "` between two parallel calls (a real recording)."""
    for between in (" ", "X"):
        body = sse(
            chunk({"role": "assistant", "content": "Checking both.  "}),
            kimi_call(0, "functions.weather:0", "Paris"),
            chunk({"content": between}),
            kimi_call(1, "functions.weather:1", "Rome"),
            chunk({}, "tool_calls"),
        )
        read, _ = read_body(body)
        kinds = [(i["type"], i.get("content", [{}])[0].get("text")) for i in raw_items(read.output)]
        assert kinds == [
            ("message", "Checking both.  "),
            ("function_call", None),
            ("message", between),
            ("function_call", None),
        ]
        output = read.output + answer(read.output, {"Paris": "rain", "Rome": "sun"})
        assert to_chat_messages(output)[0]["content"] == f"Checking both.  \n{between}"


def test_leading_whitespace_before_a_call_still_opens_no_message() -> None:
    read, _ = read_body(
        sse(chunk({"content": "\n\n"}), kimi_call(0, "c", "Oslo"), chunk({}, "tool_calls"))
    )
    assert [i["type"] for i in read.output] == ["function_call"]


def test_fragments_of_two_calls_sharing_an_id_go_to_their_own_call() -> None:
    def fragment(index: int, arguments: str, name: str | None = None) -> dict[str, Any]:
        function: dict[str, Any] = {"arguments": arguments}
        if name:
            function["name"] = name
        call = {"index": index, "id": "functions.weather:0", "function": function}
        return chunk({"tool_calls": [call]})

    body = sse(
        fragment(0, '{"city":', "weather"),
        fragment(1, '{"city":', "weather"),
        fragment(0, '"Paris"}'),
        fragment(1, '"Rome"}'),
        chunk({}, "tool_calls"),
    )
    read, _ = read_body(body)
    assert [i["arguments"] for i in raw_items(read.output)] == [
        '{"city":"Paris"}',
        '{"city":"Rome"}',
    ]
    assert len({i["call_id"] for i in raw_items(read.output)}) == 2
