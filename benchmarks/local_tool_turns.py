"""How often the embedded model's tool turn ends in an answer that uses the result.

Not a speed benchmark: a success-rate one. Every prompt is a question one of
the offered tools answers with a fact the model cannot know (a station code,
a price, a tracking number). Each turn runs through `Relay` on the local route
(llama.cpp with the `[local]` extra, 1 thread unless `--threads`), every tool
offered in every request, and is scored:

- `called`: the first response was a call (recovered from text) to the right tool;
- `reached`: the tool's result went back to the model in the next request;
- `answered`: the final message is prose holding the result's fact;
- `repeated`: the model wrote a call again after the result instead of answering.

Variants change only how this turn's items go back to the model (a client
wrapper rewrites the request), so their rates compare on the same prompts.
`shipped` sends what the loop sends (`engine.text_call_rounds`); the others
rewrite the native replay, so they mean something only against a checkout
from before those rules (`PYTHONPATH=<old>/src:.`), which is how a "before"
row is measured. Runs: temperature 0, then `--seeds` seeds at
temperature 0.7 (`--seeds 0`: temperature 0 only).

    python -m benchmarks.local_tool_turns [--variants a,b] [--seeds 2] [--out runs.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolrelay.adapters.local import QWEN_CODER_05B, LlamaOptions, LlamaServer, ensure_weights
from toolrelay.adapters.models import OpenAIChat
from toolrelay.adapters.tools import tool
from toolrelay.config import Settings
from toolrelay.core.items import is_call, raw_items
from toolrelay.core.text_tool_calls import parse_text_calls
from toolrelay.engine.interfaces import ModelRequest, ModelStream
from toolrelay.engine.limits import RunLimits
from toolrelay.engine.relay import Relay

# --- the tools: each answer holds a fact only the tool knows -------------------------------

WEATHER = {
    "paris": "14 °C, light rain (station PAR-7391)",
    "tokyo": "22 °C, clear sky (station TYO-5520)",
    "berlin": "3 °C, snow showers (station BER-1044)",
}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name, e.g. "London".
    """
    return WEATHER.get(city.strip().lower(), "9 °C, overcast (station GEN-0001)")


@tool
def get_stock_price(symbol: str) -> str:
    """The latest price of a stock.

    Args:
        symbol: The ticker symbol, e.g. "MSFT".
    """
    return f"{symbol.upper()}: 187.42 USD (+1.3% today)"


@tool
def get_time(city: str) -> str:
    """The local time in a city.

    Args:
        city: The city name.
    """
    return f"{city}: 09:41 local time, Tuesday"


@tool
def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert an amount of money between currencies.

    Args:
        amount: How much money.
        source: The currency code to convert from, e.g. "USD".
        target: The currency code to convert to, e.g. "EUR".
    """
    return f"{amount} {source.upper()} = 231.75 {target.upper()} (rate 0.927)"


@tool
def order_status(order_id: str) -> str:
    """Where a customer's order is.

    Args:
        order_id: The order number.
    """
    return f"Order {order_id}: shipped, arriving Thursday (tracking DH-88213)"


@tool
def get_population(city: str) -> str:
    """The population of a city.

    Args:
        city: The city name.
    """
    return f"{city}: 522,250 inhabitants (2021 census)"


@tool
def on_call_engineer(team: str) -> str:
    """Who is on call this week for a team.

    Args:
        team: The team name, e.g. "payments".
    """
    return f"{team}: Dana Whitfield (phone extension 4471)"


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly.

    Args:
        expression: The expression, e.g. "12 * 7".
    """
    return "3712401" if "48213" in expression else "42"


TOOLS = [
    get_weather,
    get_stock_price,
    get_time,
    convert_currency,
    order_status,
    get_population,
    on_call_engineer,
    calculator,
]


@dataclass(frozen=True)
class Case:
    prompt: str
    tool: str
    facts: tuple[str, ...]
    """Any one of these in the final answer shows it used the result."""


CASES = [
    Case("What's the weather in Paris?", "get_weather", ("PAR-7391", "14")),
    Case("Is it raining in Tokyo right now?", "get_weather", ("TYO-5520", "22", "clear")),
    Case("How cold is it in Berlin today?", "get_weather", ("BER-1044", "3 °C", "3°C", "snow")),
    Case("What is the stock price of MSFT?", "get_stock_price", ("187.42",)),
    Case("What time is it in Sydney?", "get_time", ("09:41", "9:41")),
    Case("Convert 250 USD to EUR.", "convert_currency", ("231.75",)),
    Case("Where is my order 4417?", "order_status", ("DH-88213", "Thursday")),
    Case("How many people live in Lyon?", "get_population", ("522,250", "522250", "522 250")),
    Case("Who is on call for the payments team?", "on_call_engineer", ("Whitfield",)),
    Case("What is 48213 * 77? Use the calculator.", "calculator", ("3712401", "3,712,401")),
    Case("Tell me the current weather in Paris, please.", "get_weather", ("PAR-7391", "14")),
    Case("I need the MSFT share price.", "get_stock_price", ("187.42",)),
]

# --- variants: how this turn's items go back to the model ----------------------------------

HINT = (
    "When a tool result is given to you, answer the user's question in plain sentences "
    "using that result. Do not call the same tool again."
)


def _call_json(call: Mapping[str, Any]) -> str:
    try:
        args = json.loads(str(call.get("arguments") or "{}"))
    except ValueError:
        args = {}
    return json.dumps({"name": call.get("name"), "arguments": args}, ensure_ascii=False)


def text_messages(output: Sequence[Mapping[str, Any]], result_as: str) -> list[dict[str, Any]]:
    """This turn's items as plain messages: the call as the JSON text the model wrote,
    its result as a `tool` message or a user message."""
    calls = {i["call_id"]: i for i in output if is_call(i)}
    messages: list[dict[str, Any]] = []
    for item in output:
        kind = item.get("type")
        if kind == "function_call":
            messages.append({"role": "assistant", "content": _call_json(item)})
        elif kind == "function_call_output":
            name = calls[item["call_id"]]["name"] if item["call_id"] in calls else "the tool"
            result = str(item.get("output"))
            if result_as == "tool":
                messages.append({"role": "tool", "content": result})
            elif result_as == "user2":
                messages.append(
                    {
                        "role": "user",
                        "content": f"The {name} tool returned: {result}\n"
                        "Answer my question using this result.",
                    }
                )
            else:
                messages.append(
                    {
                        "role": "user",
                        "content": f"Result of {name}: {result}\n"
                        "Answer my question using this result.",
                    }
                )
        elif kind == "message":
            text = "".join(p.get("text", "") for p in item.get("content", []))
            if text:
                messages.append({"role": "assistant", "content": text})
    return messages


def with_hint(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first['content']}\n\n{HINT}"
        return [first, *map(dict, messages[1:])]
    return [{"role": "system", "content": HINT}, *map(dict, messages)]


@dataclass(frozen=True)
class Variant:
    name: str
    render: str = "native"
    """native: tool_calls + tool messages (the loop before issue 14's rules); as-is: what the
    loop sends today, untouched (`engine.text_call_rounds`); text-tool / text-user: `text_messages`;
    fold: no assistant turn, the result as a user message after the question."""
    hint: bool = False
    tools_after_result: bool = True
    retry: bool = False
    """A call repeating an answered one is dropped and the round re-asked without tools."""


VARIANTS = {
    v.name: v
    for v in [
        Variant("current", retry=False),
        Variant("shipped", render="as-is", retry=True),
        Variant("shipped-notools", render="as-is", retry=True, tools_after_result=False),
        Variant("native-notools", tools_after_result=False),
        Variant("native-hint", hint=True),
        Variant("text-tool", render="text-tool"),
        Variant("text-user", render="text-user"),
        Variant("text-user-notools", render="text-user", tools_after_result=False),
        Variant("text-user-hint", render="text-user", hint=True),
        Variant("text-user-retry", render="text-user", retry=True),
        Variant("fold-notools", render="fold", tools_after_result=False),
        Variant("fold-retry", render="fold", retry=True),
        Variant("fold2-notools", render="fold2", tools_after_result=False),
        Variant("fold2-retry", render="fold2", retry=True),
    ]
}


def _signature(call: Mapping[str, Any]) -> tuple[str, str]:
    try:
        args = json.dumps(json.loads(str(call.get("arguments") or "{}")), sort_keys=True)
    except ValueError:
        args = str(call.get("arguments"))
    return str(call.get("name")), args


def without_repeats(output: Sequence[Mapping[str, Any]]) -> tuple[list[Any], bool]:
    """The items with calls that repeat an earlier call (and their results) left out."""
    seen: set[tuple[str, str]] = set()
    dropped: set[str] = set()
    for item in output:
        if is_call(item):
            sig = _signature(item)
            if sig in seen:
                dropped.add(item["call_id"])
            seen.add(sig)
    kept = [i for i in output if i.get("call_id") not in dropped]
    return kept, bool(dropped)


@dataclass
class Recording:
    """A client that rewrites each request per the variant and keeps what was sent."""

    client: OpenAIChat
    variant: Variant
    sent: list[dict[str, Any]] = field(default_factory=list)

    async def open(self, request: ModelRequest) -> ModelStream:
        v = self.variant
        answered = any(i.get("type") == "function_call_output" for i in request.output)
        repeated = False
        if v.retry and v.render != "as-is":
            kept, repeated = without_repeats(request.output)
            request = replace(request, output=kept)
        if v.render == "fold":
            folded = [m for m in text_messages(request.output, "user") if m["role"] == "user"]
            request = replace(request, messages=[*request.messages, *folded], output=[])
        elif v.render not in ("native", "as-is"):
            messages = [*request.messages, *text_messages(request.output, v.render[5:])]
            request = replace(request, messages=messages, output=[])
        if v.hint:
            request = replace(request, messages=with_hint(request.messages))
        if (answered and not v.tools_after_result) or repeated:
            request = replace(request, tools=[])
        self.sent.append(self.client.body(request))
        return await self.client.open(request)

    async def aclose(self) -> None:
        pass


# --- one run ---------------------------------------------------------------------------------


@dataclass
class Score:
    variant: str
    case: int
    temperature: float
    seed: int
    called: bool = False
    reached: bool = False
    answered: bool = False
    repeated: bool = False
    rounds: int = 0
    final: str = ""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


KIND = {"function_call": "c", "function_call_output": "o", "message": "m"}


def score(
    case: Case, result_output: list[dict[str, Any]], text: str, sent: list[dict[str, Any]]
) -> dict[str, Any]:
    calls = [i for i in result_output if is_call(i)]
    called = bool(calls) and result_output[0].get("type") == "function_call"
    called = called and calls[0].get("name") == case.tool
    reached = len(sent) >= 2 and any(
        f in json.dumps(sent[1]["messages"], ensure_ascii=False) for f in case.facts[:1]
    )
    final = text.strip()
    as_call = bool(final) and bool(parse_text_calls(final, [t.spec.name for t in TOOLS]))
    ended_on_call = bool(result_output) and result_output[-1].get("type") != "message"
    repeated = ended_on_call or as_call or '"name"' in final
    low = final.lower()
    answered = bool(final) and not repeated and any(f.lower() in low for f in case.facts)
    return {
        "called": called,
        "reached": reached,
        "answered": answered,
        "repeated": repeated,
        "rounds": len(sent),
        "extra": {"kinds": "".join(KIND.get(i["type"], "?") for i in result_output)},
    }


def offered_tools(case: Case) -> list[Any]:
    """The case's tool and one other (fewer tokens of prompt than all eight)."""
    other = get_time if case.tool != "get_time" else get_weather
    return [t for t in TOOLS if t.spec.name == case.tool] + [other]


async def run_one(
    client: OpenAIChat,
    variant: Variant,
    index: int,
    temperature: float,
    seed: int,
    tokens: int,
    all_tools: bool = False,
) -> Score:
    case = CASES[index]
    model = Recording(client, variant)
    # One round of tools (two with `retry`): what follows the first result is what counts.
    limits = RunLimits(max_iterations=2 if variant.retry else 1, repeat_warn=0)
    offered = TOOLS if all_tools else offered_tools(case)
    relay = Relay(model, offered, limits=limits, text_tool_calls=True, tasks=())
    params = {"temperature": temperature, "seed": seed, "max_tokens": tokens}
    started = time.perf_counter()
    result = await relay.run(case.prompt, params=params)
    await relay.aclose()
    output = raw_items(result.output)
    got = score(case, output, result.text, model.sent)
    got["extra"]["items"] = [
        [i["type"], i.get("name"), i.get("arguments") or i.get("output") or result.text]
        for i in output
    ]
    return Score(
        variant.name,
        index,
        temperature,
        seed,
        final=result.text.strip()[:300],
        seconds=round(time.perf_counter() - started, 1),
        **got,
    )


def table(scores: list[Score]) -> str:
    rows = ["variant              n  called reached answered repeated  rounds"]
    names = list(dict.fromkeys(s.variant for s in scores))
    for name in names:
        mine = [s for s in scores if s.variant == name]
        n = len(mine)

        def pct(pick: Callable[[Score], bool], of: list[Score] = mine) -> str:
            return f"{sum(map(pick, of)) / max(1, len(of)):7.0%}"

        t0 = [s for s in mine if s.temperature == 0]
        rows.append(
            f"{name:18} {n:3} {pct(lambda s: s.called)} {pct(lambda s: s.reached)}  "
            f"{pct(lambda s: s.answered)} {pct(lambda s: s.repeated)} "
            f"{sum(s.rounds for s in mine) / max(1, n):6.2f}"
            f"   (T=0: answered {pct(lambda s: s.answered, t0)})"
        )
    return "\n".join(rows)


async def main_async(args: argparse.Namespace) -> list[Score]:
    path, _ = ensure_weights(QWEN_CODER_05B, Path(args.models))
    server = LlamaServer(
        path, LlamaOptions(threads=args.threads, ctx=8192, alias=QWEN_CODER_05B.name)
    )
    client = OpenAIChat(base_url=server.base_url, model="local", api_key=server.api_key)
    runs = [(0.0, 0)] + [(0.7, s) for s in range(1, args.seeds + 1)]
    cases = range(len(CASES)) if args.cases is None else map(int, args.cases.split(","))
    scores: list[Score] = []
    try:
        for temperature, seed in runs:
            for i in cases if isinstance(cases, range) else list(cases):
                for name in args.variants.split(","):
                    s = await run_one(
                        client, VARIANTS[name], i, temperature, seed, args.tokens, args.all_tools
                    )
                    scores.append(s)
                    print(
                        f"{name:18} #{i:<2} T={temperature} seed={seed} "
                        f"{'C' if s.called else '-'}{'R' if s.reached else '-'}"
                        f"{'A' if s.answered else '-'}{'P' if s.repeated else '-'} "
                        f"{s.seconds:5.1f}s {s.extra['kinds']:6} {s.final[:90]!r}",
                        flush=True,
                    )
                    print("    ", json.dumps(s.extra["items"], ensure_ascii=False), flush=True)
    finally:
        await client.aclose()
        server.close()
    return scores


def run(quick: bool = False) -> None:
    argv = ["--seeds", "0", "--cases", "0,3,6"] if quick else []
    main(argv)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.local_tool_turns")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--cases", default=None, help="comma-separated case indexes")
    parser.add_argument("--tokens", type=int, default=48, help="max_tokens per response")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--all-tools", action="store_true", help="offer all eight tools")
    parser.add_argument("--models", default=str(Settings().data_dir / "models"))
    parser.add_argument("--out", default=None, help="write every run as JSON")
    args = parser.parse_args(argv)
    scores = asyncio.run(main_async(args))
    print(table(scores))
    if args.out:
        Path(args.out).write_text(json.dumps([s.__dict__ for s in scores], indent=1))


if __name__ == "__main__":
    main()
