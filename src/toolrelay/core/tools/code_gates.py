"""Who may use the legacy `<code_interpreter>` tag path (SPEC R5).

The tag path runs code the model wrote in plain text, so it is opened only
when all five gates agree, the same ones the native tool passes: the feature
was requested for this chat, the model's built-in tools allow it, it is on
globally, the model has the capability, and the user may use it (admins
always may). Any gate that is unknown counts as its default, written below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def code_interpreter_allowed(
    *,
    requested: bool,
    globally_enabled: bool,
    builtin_tools: Mapping[str, Any] | None = None,
    capabilities: Mapping[str, Any] | None = None,
    user: Mapping[str, Any] | None = None,
) -> bool:
    """True only when every gate is open; a missing model setting defaults to allowed."""
    if not (requested and globally_enabled):
        return False
    if (builtin_tools or {}).get("code_interpreter", True) is not True:
        return False
    if (capabilities or {}).get("code_interpreter", True) is not True:
        return False
    if user is None:
        return False
    if user.get("role") == "admin" or user.get("is_admin") is True:
        return True
    features = (user.get("permissions") or {}).get("features") or {}
    return features.get("code_interpreter") is True
