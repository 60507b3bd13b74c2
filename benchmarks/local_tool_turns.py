"""How often the embedded model's tool turn ends in an answer that uses the result.

Not a speed benchmark: a success-rate one. Thirteen prompts are questions one
of the offered tools answers with a fact the model cannot know (a station
code, a price, a tracking number); four are plain questions ("Say hi.",
"Name three colours.") to be answered as text with the same tools offered.
Each turn runs through `Relay` on the local route (llama.cpp with the
`[local]` extra, 1 thread unless `--threads`), offered `--tools` tools (1, 3
or 9: the question's own tool and the ones after it in `TOOLS`), and is
scored:

- `called`: the first response was a call (recovered from text) to the right tool;
- `reached`: the tool's result went back to the model in the next request;
- `answered`: the final message is prose holding the result's fact; for a plain
  question, prose and no call at all;
- `repeated`: the model wrote a call again after the result instead of answering.

Variants: `shipped` is the loop as a text-call route runs it without the
tool-selection step; `select` with it (`tool_choice_step`,
`engine.tool_select`), as the route `local` runs. The others rewrite how this
turn's items go back to the model (a client wrapper rewrites the request), so
they mean something only against a checkout from before the text-call rules
(`PYTHONPATH=<old>/src:.`). A turn gets one round of tools (two for variants
that retry). Runs: temperature 0, then `--seeds` seeds at temperature 0.7
(`--seeds 0`: temperature 0 only). `--gguf FILE` loads another model (the
1.5B, for one). The table: one row per (variant, tools, temperature, seed).

    python -m benchmarks.local_tool_turns [--tools 1,3,9] [--seeds 2] [--variants shipped,select]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolrelay.adapters.local import LOCAL_WEIGHTS, LlamaOptions, LlamaServer, ensure_weights
from toolrelay.adapters.models import OpenAIChat
from toolrelay.adapters.tools import tool
from toolrelay.config import Settings
from toolrelay.core.items import is_call, raw_items
from toolrelay.core.text_calls.parse import parse_text_calls
from toolrelay.engine.interfaces import ModelRequest, ModelStream
from toolrelay.engine.limits import RunLimits
from toolrelay.engine.relay import Relay
from toolrelay.engine.tool_select import SELECT_PROMPT

WEIGHTS = LOCAL_WEIGHTS

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


@tool
def flight_status(flight: str) -> str:
    """The status of a flight today.

    Args:
        flight: The flight number, e.g. "LH 400".
    """
    return f"{flight.upper()}: delayed 35 minutes, gate B22"


TOOLS = [
    get_weather,
    get_stock_price,
    get_time,
    convert_currency,
    order_status,
    get_population,
    on_call_engineer,
    calculator,
    flight_status,
]


@dataclass(frozen=True)
class Case:
    prompt: str
    tool: str
    """The tool the question needs; "" for a plain question, to be answered as text."""
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
    Case("Is flight LH 400 on time?", "flight_status", ("35", "B22")),
    # plain questions: answered as text, no call, whatever tools are offered
    Case("Say hi.", "", ()),
    Case("Name three colours.", "", ()),
    Case("What does HTTP stand for?", "", ()),
    Case("Write one sentence about the sea.", "", ()),
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
    select: bool = False
    """The loop's tool-selection step (`tool_choice_step`, `engine.tool_select`)."""
    max_tools: int = 2


VARIANTS = {
    v.name: v
    for v in [
        Variant("current", retry=False),
        Variant("shipped", render="as-is", retry=True),
        Variant("select", render="as-is", retry=True, select=True),
        Variant("select1", render="as-is", retry=True, select=True, max_tools=1),
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
    """`answered`: for a tool question, prose holding the result's fact; for a plain
    question, prose and no call at all (`called` then means a call was made)."""
    sent = [b for b in sent if not is_selection(b)]
    calls = [i for i in result_output if is_call(i)]
    final = text.strip()
    as_call = bool(final) and bool(parse_text_calls(final, [t.spec.name for t in TOOLS]))
    ended_on_call = bool(result_output) and result_output[-1].get("type") != "message"
    repeated = ended_on_call or as_call or '"name"' in final
    kinds = "".join(KIND.get(i["type"], "?") for i in result_output)
    if not case.tool:
        text_answer = bool(final) and not calls and not repeated and not final.startswith("{")
        common = {"reached": False, "repeated": repeated, "rounds": len(sent)}
        return {"called": bool(calls), "answered": text_answer, **common, "extra": {"kinds": kinds}}
    called = bool(calls) and result_output[0].get("type") == "function_call"
    called = called and calls[0].get("name") == case.tool
    reached = len(sent) >= 2 and any(
        f in json.dumps(sent[1]["messages"], ensure_ascii=False) for f in case.facts[:1]
    )
    low = final.lower()
    answered = bool(final) and not repeated and any(f.lower() in low for f in case.facts)
    return {
        "called": called,
        "reached": reached,
        "answered": answered,
        "repeated": repeated,
        "rounds": len(sent),
        "extra": {"kinds": kinds},
    }


def is_selection(body: Mapping[str, Any]) -> bool:
    """A request of the tool-selection step (`engine.tool_select`), not of the turn proper."""
    messages = body.get("messages") or []
    return bool(messages) and str(messages[0].get("content", "")).startswith(SELECT_PROMPT[:40])


def offered_tools(index: int, count: int) -> list[Any]:
    """`count` tools: the case's own and the ones after it in `TOOLS` (wrapping round), in
    `TOOLS` order; a plain question gets `count` tools starting at a place its index picks."""
    case = CASES[index]
    names = [t.spec.name for t in TOOLS]
    start = names.index(case.tool) if case.tool else index % len(TOOLS)
    picked = {(start + k) % len(TOOLS) for k in range(min(count, len(TOOLS)))}
    return [t for k, t in enumerate(TOOLS) if k in picked]


async def run_one(
    client: OpenAIChat,
    variant: Variant,
    index: int,
    temperature: float,
    seed: int,
    tokens: int,
    count: int,
) -> Score:
    case = CASES[index]
    model = Recording(client, variant)
    # One round of tools (two with `retry`): what follows the first result is what counts.
    limits = RunLimits(max_iterations=2 if variant.retry else 1, repeat_warn=0)
    relay = Relay(
        model,
        offered_tools(index, count),
        limits=limits,
        text_tool_calls=True,
        tasks=(),
        tool_choice_step=variant.select,
        max_tools_per_call=variant.max_tools,
    )
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
    got["extra"]["tools"] = count
    return Score(
        variant.name,
        index,
        temperature,
        seed,
        final=result.text.strip()[:300],
        seconds=round(time.perf_counter() - started, 1),
        **got,
    )


def _rate(scores: list[Score]) -> str:
    return f"{sum(s.answered for s in scores)}/{len(scores)}" if scores else "-"


def table(scores: list[Score]) -> str:
    """One row per variant, tools offered and run (temperature, seed): tool questions
    answered with the result's fact, plain questions answered as text, s per turn."""
    rows = [
        "variant            tools  T    seed  tool turns answered  plain as text  "
        "first call right  s/turn"
    ]
    keys = list(dict.fromkeys((s.variant, s.extra["tools"], s.temperature, s.seed) for s in scores))
    for variant, tools, temperature, seed in keys:
        mine = [
            s
            for s in scores
            if (s.variant, s.extra["tools"], s.temperature, s.seed)
            == (variant, tools, temperature, seed)
        ]
        need = [s for s in mine if CASES[s.case].tool]
        plain = [s for s in mine if not CASES[s.case].tool]
        called = f"{sum(s.called for s in need)}/{len(need)}"
        rows.append(
            f"{variant:18} {tools:5}  {temperature:<4} {seed:4}  {_rate(need):>19}  "
            f"{_rate(plain):>13}  {called:>16}  {sum(s.seconds for s in mine) / len(mine):6.1f}"
        )
    rows.append("")
    rows.append("totals over runs:")
    for variant, tools in dict.fromkeys((s.variant, s.extra["tools"]) for s in scores):
        mine = [s for s in scores if (s.variant, s.extra["tools"]) == (variant, tools)]
        need = [s for s in mine if CASES[s.case].tool]
        plain = [s for s in mine if not CASES[s.case].tool]
        rows.append(
            f"{variant:18} {tools:5}  tool turns {_rate(need):>7}  plain {_rate(plain):>6}  "
            f"{sum(s.seconds for s in mine) / len(mine):5.1f} s/turn"
        )
    return "\n".join(rows)


async def main_async(args: argparse.Namespace) -> list[Score]:
    weights = WEIGHTS[args.weights]
    path = Path(args.gguf) if args.gguf else ensure_weights(weights, Path(args.models))[0]
    server = LlamaServer(path, LlamaOptions(threads=args.threads, ctx=8192, alias=path.stem))
    client = OpenAIChat(base_url=server.base_url, model="local", api_key=server.api_key)
    runs = [(0.0, 0)] if args.t0 else []
    runs += [(0.7, s) for s in range(args.first_seed, args.first_seed + args.seeds)]
    cases = list(range(len(CASES))) if args.cases is None else map(int, args.cases.split(","))
    cases = list(cases)
    counts = [int(n) for n in args.tools.split(",")]
    scores: list[Score] = []
    try:
        for temperature, seed in runs:
            for count in counts:
                for i in cases:
                    for name in args.variants.split(","):
                        s = await run_one(
                            client, VARIANTS[name], i, temperature, seed, args.tokens, count
                        )
                        scores.append(s)
                        print(
                            f"{name:18} tools={count} #{i:<2} T={temperature} seed={seed} "
                            f"{'C' if s.called else '-'}{'R' if s.reached else '-'}"
                            f"{'A' if s.answered else '-'}{'P' if s.repeated else '-'} "
                            f"{s.seconds:5.1f}s {s.extra['kinds']:6} {s.final[:90]!r}",
                            flush=True,
                        )
                        if args.verbose:
                            print("    ", json.dumps(s.extra["items"], ensure_ascii=False))
    finally:
        await client.aclose()
        server.close()
    return scores


def run(quick: bool = False) -> None:
    argv = ["--seeds", "0", "--cases", "0,3,6,13", "--tools", "9"] if quick else []
    main(argv)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.local_tool_turns")
    parser.add_argument("--variants", default="shipped,select")
    parser.add_argument("--seeds", type=int, default=2, help="runs at temperature 0.7")
    parser.add_argument("--first-seed", type=int, default=1, help="the first 0.7 run's seed")
    parser.add_argument("--t0", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--tools", default="1,3,9", help="tools offered per turn (1-9)")
    parser.add_argument("--cases", default=None, help="comma-separated case indexes")
    parser.add_argument("--tokens", type=int, default=64, help="max_tokens per response")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--weights", default="0.5b", choices=sorted(WEIGHTS))
    parser.add_argument("--gguf", default=None, help="a GGUF file to load instead")
    parser.add_argument("--models", default=str(Settings().data_dir / "models"))
    parser.add_argument("--verbose", action="store_true", help="print every turn's items")
    parser.add_argument("--out", default=None, help="write every run as JSON")
    args = parser.parse_args(argv)
    scores = asyncio.run(main_async(args))
    print(table(scores))
    if args.out:
        Path(args.out).write_text(json.dumps([s.__dict__ for s in scores], indent=1))


if __name__ == "__main__":
    main()
