"""The body guard's depth count, at its boundary."""

from __future__ import annotations

from typing import Any

from toolrelay.server.guard import MAX_JSON_DEPTH, too_deep


def lists(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def test_depth_counts_every_container() -> None:
    assert not too_deep(lists(MAX_JSON_DEPTH))
    assert too_deep(lists(MAX_JSON_DEPTH + 1))
    assert too_deep({"a": {"b": lists(MAX_JSON_DEPTH - 1)}})
    assert not too_deep({"a": lists(MAX_JSON_DEPTH - 1)})


def test_scalars_and_empty_containers_are_shallow() -> None:
    assert not too_deep(5)
    assert not too_deep("x")
    assert not too_deep([])
    assert not too_deep({})
