"""What a client may add to the upstream request body (the `/v1` front doors' extra keys).

Every extra key of a request used to be forwarded and to override the
route's own params; this is the one policy both front doors share:

1. Keys that would replace the conversation (`input`, `instructions`,
   `messages`, `previous_response_id`, `prompt`, `conversation`) are a 400.
2. `store` and `service_tier` cost money or keep data upstream: they pass
   only where the route lists them in `allow_params`, else a 400.
3. The standard parameters of the front door's API pass, renamed for the
   route's upstream API (`max_output_tokens` ↔ `max_tokens`, Ollama's
   `num_predict` …); one with no equivalent upstream is dropped.
4. Anything else (vLLM's `top_k`, `chat_template_kwargs` …) passes only if
   the route lists it in `allow_params`, else a 400 naming the key.
5. The route's own `params` are pinned: a client value for one of them is
   ignored unless the route lists the key in `overridable`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from toolrelay.config.settings import ModelRoute
from toolrelay.server.error_responses import APIError

Front = Literal["chat", "responses"]

CONVERSATION_KEYS: Final = frozenset(
    {"messages", "input", "instructions", "previous_response_id", "prompt", "conversation"}
)
GATED: Final = frozenset({"store", "service_tier"})

_COMMON: Final = frozenset(
    {
        "temperature",
        "top_p",
        "tool_choice",
        "parallel_tool_calls",
        "user",
        "metadata",
        "top_logprobs",
        "safety_identifier",
        "prompt_cache_key",
    }
)
STANDARD: Final[dict[Front, frozenset[str]]] = {
    "chat": _COMMON
    | {
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "seed",
        "response_format",
        "reasoning_effort",
        "modalities",
        "audio",
        "prediction",
        "web_search_options",
        "verbosity",
        "n",
    },
    "responses": _COMMON
    | {"max_output_tokens", "reasoning", "text", "truncation", "include", "max_tool_calls"},
}

_LIMIT_KEYS: Final = frozenset({"max_tokens", "max_completion_tokens", "max_output_tokens"})
_LIMIT_NAME: Final = {
    "openai-chat": "max_tokens",
    "openai-responses": "max_output_tokens",
    "ollama": "num_predict",
}
_OLLAMA: Final = frozenset(
    {"temperature", "top_p", "seed", "stop", "presence_penalty", "frequency_penalty", "num_predict"}
)
_ONLY_CHAT: Final = frozenset(STANDARD["chat"] - _COMMON)
_ONLY_RESPONSES: Final = frozenset(STANDARD["responses"] - _COMMON)


def client_params(extra: Mapping[str, Any], front: Front, route: ModelRoute) -> dict[str, Any]:
    """The client's extra keys that go upstream, named as the route's API names them."""
    allowed = frozenset(route.allow_params)
    out: dict[str, Any] = {}
    for key, value in extra.items():
        _check(key, front, allowed)
        if key in STANDARD[front] and key not in allowed:
            out.update(_translated(key, value, route.kind))
        else:
            out[key] = value
    pinned = set(route.params) - set(route.overridable)
    return {k: v for k, v in out.items() if k not in pinned}


def _check(key: str, front: Front, allowed: frozenset[str]) -> None:
    if key in CONVERSATION_KEYS:
        raise APIError(
            400,
            f"`{key}` would replace the conversation; it is not accepted on this endpoint.",
            param=key,
            code="unsupported_parameter",
        )
    if key in allowed or (key in STANDARD[front] and key not in GATED):
        return
    reason = (
        "it costs money or keeps data upstream"
        if key in GATED
        else "it is not a standard OpenAI parameter"
    )
    raise APIError(
        400,
        f"`{key}` is not accepted on this model: {reason}, and the route does not allow it.",
        param=key,
        code="unsupported_parameter",
    )


def _translated(key: str, value: Any, kind: str) -> dict[str, Any]:
    """One standard parameter in the upstream API's words; {} when it has none there."""
    if key in _LIMIT_KEYS:
        name = _LIMIT_NAME.get(kind, key)
        return {key if key == "max_completion_tokens" and kind == "openai-chat" else name: value}
    if kind == "ollama":
        return {key: value} if key in _OLLAMA else {}
    if key == "reasoning_effort" and kind == "openai-responses":
        return {"reasoning": {"effort": value}}
    if key == "reasoning" and kind == "openai-chat":
        effort = value.get("effort") if isinstance(value, Mapping) else None
        return {"reasoning_effort": effort} if effort else {}
    if kind == "openai-chat" and key in _ONLY_RESPONSES:
        return {}
    if kind == "openai-responses" and key in _ONLY_CHAT:
        return {}
    return {key: value}
