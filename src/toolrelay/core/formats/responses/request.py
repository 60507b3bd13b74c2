"""The Responses request body a model client sends (`POST /v1/responses`).

The history is converted with `convert.history_input`, this turn's items with
`core.formats.transcript.to_responses_input`; function tools take the flat shape.

SPEC R14: `stateful` is the one flag. A stateful client sends `store: true`
and, when the engine names the turn's previous response
(`previous_response_id`), only the system message(s) and this iteration's
new items (`output[new_items_from:]`) with `previous_response_id`;
otherwise (and always when not stateful) the whole history is resent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from toolrelay.core.formats.responses.convert import flat_tool, history_input
from toolrelay.core.formats.transcript import to_responses_input
from toolrelay.core.items import Item

__all__ = ["request_body"]

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


def request_body(
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Sequence[Item] = (),
    tools: Sequence[Mapping[str, Any]] = (),
    stream: bool = True,
    stateful: bool = False,
    previous_response_id: str | None = None,
    new_items_from: int = 0,
    defaults: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body for one model call (module doc: stateless vs stateful)."""
    body: dict[str, Any] = {"model": model}
    if stateful and previous_response_id is not None:
        system = [m for m in messages if m.get("role") in _SYSTEM_ROLES]
        body["previous_response_id"] = previous_response_id
        body["input"] = history_input(system) + to_responses_input(
            output[new_items_from:], context=output
        )
    else:
        body["input"] = history_input(messages) + to_responses_input(output)
    body["stream"] = stream
    if tools:
        body["tools"] = [flat_tool(t) for t in tools]
    body["store"] = stateful
    body.update(defaults or {})
    body.update(params or {})
    return body
