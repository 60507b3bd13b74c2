"""The five gates of the legacy code-interpreter path (SPEC R5)."""

from __future__ import annotations

from itertools import product
from typing import Any

from toolrelay.core.tools.code_gates import code_interpreter_allowed

ALLOWED_USER = {"role": "user", "permissions": {"features": {"code_interpreter": True}}}


def test_all_gates_open() -> None:
    assert code_interpreter_allowed(requested=True, globally_enabled=True, user=ALLOWED_USER)


def test_any_closed_gate_closes_the_path() -> None:
    options: dict[str, list[Any]] = {
        "requested": [True, False],
        "globally_enabled": [True, False],
        "builtin_tools": [None, {"code_interpreter": False}],
        "capabilities": [None, {"code_interpreter": False}],
        "user": [ALLOWED_USER, {"role": "user"}, None],
    }
    for values in product(*options.values()):
        kwargs = dict(zip(options, values, strict=True))
        expected = (
            kwargs["requested"]
            and kwargs["globally_enabled"]
            and kwargs["builtin_tools"] is None
            and kwargs["capabilities"] is None
            and kwargs["user"] is ALLOWED_USER
        )
        assert code_interpreter_allowed(**kwargs) is expected, kwargs


def test_admins_need_no_feature_permission() -> None:
    assert code_interpreter_allowed(requested=True, globally_enabled=True, user={"role": "admin"})
    assert code_interpreter_allowed(requested=True, globally_enabled=True, user={"is_admin": True})
    assert not code_interpreter_allowed(
        requested=False, globally_enabled=True, user={"role": "admin"}
    )
