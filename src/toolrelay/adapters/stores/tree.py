"""A chat's messages as a tree, and its current branch (issue 29 item 8).

Every message names the one before it (`parent_id`; None for a chat's first), so a
regenerated answer or an edited question is a new child beside the old one (its
sibling) instead of replacing it. A chat that never branched is a line: its
branch is all its messages in order, and the stores read it as they always did.
Once branched, the chat records its current leaf; its branch (what the page
shows and what the model reads) is the path from the first message to that leaf.

Pure functions over `{message id: parent id}` in creation order, shared by both
stores: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["branch_ids", "children_of", "newest_leaf", "sibling_ids"]


def branch_ids(parents: Mapping[str, str | None], leaf: str) -> list[str]:
    """The ids from the first message to `leaf`, in order (empty for an unknown leaf).
    A damaged chain (a cycle, a missing parent) ends the walk rather than looping."""
    path: list[str] = []
    seen: set[str] = set()
    node: str | None = leaf
    while node is not None and node in parents and node not in seen:
        seen.add(node)
        path.append(node)
        node = parents[node]
    return path[::-1]


def children_of(parents: Mapping[str, str | None]) -> dict[str | None, list[str]]:
    """Each message's children (None: the chat's first messages), oldest first."""
    children: dict[str | None, list[str]] = {}
    for mid, parent in parents.items():
        children.setdefault(parent, []).append(mid)
    return children


def sibling_ids(parents: Mapping[str, str | None]) -> dict[str, tuple[str, ...]]:
    """For each message that has siblings, all of them (itself included), oldest first;
    one without any is left out."""
    return {
        mid: tuple(group)
        for group in children_of(parents).values()
        if len(group) > 1
        for mid in group
    }


def newest_leaf(parents: Mapping[str, str | None], start: str) -> str:
    """The leaf reached from `start` by always taking the newest child: the branch a
    switch to `start` shows (as Open WebUI's sibling arrows do)."""
    children = children_of(parents)
    node, seen = start, {start}
    while (below := children.get(node)) and below[-1] not in seen:
        node = below[-1]
        seen.add(node)
    return node
