"""Token usage: one shape for every provider, and a running total across loop rounds.

Providers report usage under different names: OpenAI Chat Completions says
`prompt_tokens`/`completion_tokens`, the Responses API `input_tokens`/
`output_tokens`, Ollama `prompt_eval_count`/`eval_count`, and llama.cpp puts
`prompt_n`/`cache_n`/`predicted_n` in a `timings` object. `normalise_usage`
adds the three canonical keys (`input_tokens`, `output_tokens`,
`total_tokens`) and keeps everything else, so nothing a provider said is lost.

`merge_usage` folds one round's usage into the turn's total (reference §2.7):
token and cost counts are summed, `*_tokens_details` dicts are summed key by
key, and any other key takes the latest value; an incoming `null` never erases a
value. Counts sent as numeric strings (`"10"`) are read as numbers, and a
`total_tokens` of 0 is replaced by input + output. Both functions are pure: they
never mutate their inputs and never share nested dicts with them.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["SUMMED_KEYS", "merge_usage", "normalise_usage"]

SUMMED_KEYS: Final = frozenset(
    {
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "total_cost",
        "input_cost",
        "output_cost",
        "prompt_cost",
        "completion_cost",
    }
)
"""Keys whose values add up across rounds (every round is a separate request)."""

_INPUT_KEYS: Final = ("input_tokens", "prompt_tokens", "prompt_eval_count")
_OUTPUT_KEYS: Final = ("output_tokens", "completion_tokens", "eval_count")
_DETAILS_SUFFIX: Final = "_tokens_details"


def _number(value: object) -> int | float | None:
    """A count or cost: ints and finite floats, and numeric strings (`"10"`) some
    providers send; bools, NaN, infinities and other text are not numbers."""
    if value.__class__ is str:
        text = str(value).strip()
        try:
            value = int(text)
        except ValueError:  # also digits beyond int's string limit
            try:
                value = float(text)
            except ValueError:
                return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def _as_int(value: object) -> int | None:
    """A token count as int (see `_number`)."""
    number = _number(value)
    return None if number is None else int(number)


def _first_int(raw: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = _as_int(raw.get(key))
        if value is not None:
            return value
    return None


def _timings(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """llama.cpp counters: a nested `timings` object, or already flattened into usage."""
    nested = raw.get("timings")
    if isinstance(nested, Mapping):
        return {**nested, **{k: v for k, v in raw.items() if k != "timings"}}
    return raw


def _llama_input(raw: Mapping[str, Any]) -> int | None:
    """llama.cpp counts evaluated (`prompt_n`) and cached (`cache_n`) prompt tokens apart."""
    timings = _timings(raw)
    prompt_n = _as_int(timings.get("prompt_n"))
    cache_n = _as_int(timings.get("cache_n"))
    if prompt_n is None and cache_n is None:
        return None
    return (prompt_n or 0) + (cache_n or 0)


def normalise_usage(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """`raw` plus int `input_tokens`, `output_tokens` and `total_tokens`; `{}` if unusable.

    The first key present with a number wins, in the order the module
    docstring lists; a missing input count is 0, as is a missing output count.
    """
    if not isinstance(raw, Mapping) or not raw:
        return {}
    usage = copy.deepcopy(dict(raw))
    timings = _timings(raw)
    input_tokens = _first_int(raw, _INPUT_KEYS)
    if input_tokens is None:
        input_tokens = _llama_input(raw) or 0
    output_tokens = _first_int(raw, _OUTPUT_KEYS)
    if output_tokens is None:
        output_tokens = _as_int(timings.get("predicted_n")) or 0
    for key in SUMMED_KEYS.intersection(usage):
        number = _number(usage[key])
        if number is not None:
            usage[key] = number
    total = _as_int(raw.get("total_tokens"))
    usage["input_tokens"] = input_tokens
    usage["output_tokens"] = output_tokens
    usage["total_tokens"] = total or input_tokens + output_tokens  # 0 is "not counted"
    return usage


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _sum_details(current: Mapping[str, Any], incoming: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers add, nested dicts recurse, anything else takes the incoming value."""
    merged = copy.deepcopy(dict(current))
    for key, value in incoming.items():
        old = merged.get(key)
        if value is None and key in merged:
            continue  # a null says nothing: it must not erase what earlier rounds said
        if _is_number(old) and _is_number(value):
            merged[key] = old + value
        elif isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = _sum_details(old, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def merge_usage(
    current: Mapping[str, Any] | None, incoming: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The running usage after one more round: both sides normalised, then combined."""
    merged = normalise_usage(current)
    for key, value in normalise_usage(incoming).items():
        old = merged.get(key)
        if value is None and key in merged:
            continue  # a null says nothing: it must not erase what earlier rounds said
        if key in SUMMED_KEYS and _is_number(old) and _is_number(value):
            merged[key] = old + value
        elif (
            key.endswith(_DETAILS_SUFFIX)
            and isinstance(old, Mapping)
            and isinstance(value, Mapping)
        ):
            merged[key] = _sum_details(old, value)
        else:
            merged[key] = value
    return merged
