"""Continuing a cut answer (issue 29 item 8): the model's new text joins the old text.

A continued turn starts from the answer's items (`Relay.run(resume=…,
continues=item_id)`): the model reads them as the assistant's last message and
goes on writing. Its first response's opening message item is the rest of the
cut message item `item_id`, so the two become one item (the old id, the texts
joined without a break) instead of two paragraphs. Pure; the loop applies it once.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolrelay.core.items import Item, is_message, item_text, updated

__all__ = ["joined"]


def joined(output: Sequence[Item], new: Sequence[Item], item_id: str) -> list[Item] | None:
    """`output` followed by `new`, with `new`'s first item appended to `output`'s last
    when that is message `item_id` and the first new item is a message; None otherwise
    (nothing to join: the items simply follow)."""
    if not output or not new:
        return None
    last, first = output[-1], new[0]
    if last.get("id") != item_id or not is_message(last) or not is_message(first):
        return None
    text = item_text(last) + item_text(first)
    whole = updated(
        last, content=[{"type": "output_text", "text": text}], status=first.get("status")
    )
    return [*output[:-1], whole, *new[1:]]
