"""core.turn.usage: provider usage shapes normalised, and summed across loop rounds."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolrelay.core.turn.usage import merge_usage, normalise_usage


def test_openai_chat_usage_gains_canonical_keys() -> None:
    raw = {
        "prompt_tokens": 12,
        "completion_tokens": 5,
        "total_tokens": 17,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    assert normalise_usage(raw) == {
        "prompt_tokens": 12,
        "completion_tokens": 5,
        "total_tokens": 17,
        "prompt_tokens_details": {"cached_tokens": 4},
        "input_tokens": 12,
        "output_tokens": 5,
    }


def test_responses_usage_keeps_its_own_names() -> None:
    raw = {"input_tokens": 30, "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3}}
    assert normalise_usage(raw) == {
        "input_tokens": 30,
        "output_tokens": 7,
        "total_tokens": 37,
        "output_tokens_details": {"reasoning_tokens": 3},
    }


def test_ollama_counts() -> None:
    raw = {"prompt_eval_count": 26, "eval_count": 298, "eval_duration": 4709213000}
    assert normalise_usage(raw) == {
        "prompt_eval_count": 26,
        "eval_count": 298,
        "eval_duration": 4709213000,
        "input_tokens": 26,
        "output_tokens": 298,
        "total_tokens": 324,
    }


def test_llama_cpp_nested_timings_add_cached_prompt_tokens() -> None:
    raw = {"timings": {"prompt_n": 10, "cache_n": 90, "predicted_n": 42, "predicted_ms": 800.5}}
    assert normalise_usage(raw) == {
        "timings": {"prompt_n": 10, "cache_n": 90, "predicted_n": 42, "predicted_ms": 800.5},
        "input_tokens": 100,
        "output_tokens": 42,
        "total_tokens": 142,
    }


def test_llama_cpp_flattened_timings() -> None:
    raw = {"prompt_n": 8, "predicted_n": 2}
    assert normalise_usage(raw) == {
        "prompt_n": 8,
        "predicted_n": 2,
        "input_tokens": 8,
        "output_tokens": 2,
        "total_tokens": 10,
    }


def test_earlier_names_win_and_floats_become_ints() -> None:
    raw = {"input_tokens": 3.0, "prompt_tokens": 99, "completion_tokens": 4, "eval_count": 50}
    usage = normalise_usage(raw)
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (3, 4, 7)
    assert type(usage["input_tokens"]) is int


def test_missing_output_is_zero_and_given_total_is_kept() -> None:
    assert normalise_usage({"prompt_tokens": 5, "total_tokens": 6}) == {
        "prompt_tokens": 5,
        "total_tokens": 6,
        "input_tokens": 5,
        "output_tokens": 0,
    }


@pytest.mark.parametrize("raw", [None, {}, [], "usage", 7])
def test_garbage_is_empty(raw: Any) -> None:
    assert normalise_usage(raw) == {}


def test_non_numeric_counts_are_skipped() -> None:
    usage = normalise_usage({"prompt_tokens": True, "prompt_eval_count": "nine", "eval_count": 4})
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (0, 4, 4)


def test_numeric_string_counts_are_read() -> None:
    usage = normalise_usage({"prompt_tokens": "10", "completion_tokens": " 5 ", "cost": "0.5"})
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (10, 5, 15)


def test_zero_total_is_the_sum() -> None:
    usage = normalise_usage({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 0})
    assert usage["total_tokens"] == 10


def test_merge_sums_numeric_string_counts() -> None:
    merged = merge_usage({"prompt_tokens": "10", "cost": "0.25"}, {"prompt_tokens": 5, "cost": 0.5})
    assert (merged["prompt_tokens"], merged["input_tokens"], merged["cost"]) == (15, 15, 0.75)


def test_merge_ignores_incoming_nulls() -> None:
    first = {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "cost": 0.5,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    second = {
        "prompt_tokens": 3,
        "completion_tokens": 1,
        "cost": None,
        "prompt_tokens_details": None,
        "completion_tokens_details": {"reasoning_tokens": None},
    }
    merged = merge_usage(first, second)
    assert merged["cost"] == 0.5
    assert merged["prompt_tokens_details"] == {"cached_tokens": 4}
    assert merged["total_tokens"] == 16
    nested = merge_usage(
        {"completion_tokens_details": {"reasoning_tokens": 6}},
        {"completion_tokens_details": {"reasoning_tokens": None}},
    )
    assert nested["completion_tokens_details"] == {"reasoning_tokens": 6}


def test_normalise_does_not_mutate_or_alias() -> None:
    raw = {"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 1}}
    before = copy.deepcopy(raw)
    usage = normalise_usage(raw)
    usage["prompt_tokens_details"]["cached_tokens"] = 99
    assert raw == before


def test_merge_sums_three_rounds_including_details() -> None:
    rounds = [
        {
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "total_tokens": 110,
            "cost": 0.5,
            "model": "m-1",
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 1},
            "completion_tokens_details": {"reasoning_tokens": 4},
        },
        {
            "prompt_tokens": 150,
            "completion_tokens": 20,
            "total_tokens": 170,
            "cost": 0.25,
            "model": "m-2",
            "prompt_tokens_details": {"cached_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 6, "nested": {"a": 1}},
        },
        {
            "prompt_tokens": 200,
            "completion_tokens": 5,
            "total_tokens": 205,
            "cost": 0.25,
            "model": "m-3",
            "prompt_tokens_details": {"cached_tokens": 150},
            "completion_tokens_details": {"reasoning_tokens": 0, "nested": {"a": 2}},
        },
    ]
    total: dict[str, Any] = {}
    for usage in rounds:
        total = merge_usage(total, usage)
    assert total == {
        "prompt_tokens": 450,
        "completion_tokens": 35,
        "total_tokens": 485,
        "input_tokens": 450,
        "output_tokens": 35,
        "cost": 1.0,
        "model": "m-3",
        "prompt_tokens_details": {"cached_tokens": 250, "audio_tokens": 1},
        "completion_tokens_details": {"reasoning_tokens": 10, "nested": {"a": 3}},
    }


def test_merge_across_provider_shapes_sums_canonical_keys() -> None:
    ollama = {"prompt_eval_count": 10, "eval_count": 3}
    llama = {"timings": {"prompt_n": 2, "cache_n": 8, "predicted_n": 4}}
    merged = merge_usage(ollama, llama)
    assert (merged["input_tokens"], merged["output_tokens"], merged["total_tokens"]) == (20, 7, 27)
    assert merged["prompt_eval_count"] == 10
    assert merged["timings"] == {"prompt_n": 2, "cache_n": 8, "predicted_n": 4}


def test_merge_with_nothing_is_normalised_other_side() -> None:
    assert merge_usage(None, {"prompt_tokens": 2}) == {
        "prompt_tokens": 2,
        "input_tokens": 2,
        "output_tokens": 0,
        "total_tokens": 2,
    }
    assert merge_usage({"eval_count": 3}, None) == {
        "eval_count": 3,
        "input_tokens": 0,
        "output_tokens": 3,
        "total_tokens": 3,
    }
    assert merge_usage(None, None) == {}


def test_merge_takes_latest_for_non_numeric_and_non_summed_keys() -> None:
    merged = merge_usage(
        {"prompt_tokens": 1, "eval_duration": 100, "cost": "n/a"},
        {"prompt_tokens": 2, "eval_duration": 50, "cost": 0.1},
    )
    assert merged["eval_duration"] == 50
    assert merged["cost"] == 0.1
    assert merged["prompt_tokens"] == 3


def test_merge_is_pure() -> None:
    current = {"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 1}}
    incoming = {"prompt_tokens": 2, "prompt_tokens_details": {"cached_tokens": 2}}
    snapshot = copy.deepcopy((current, incoming))
    merged = merge_usage(current, incoming)
    merged["prompt_tokens_details"]["cached_tokens"] = 0
    assert (current, incoming) == snapshot
