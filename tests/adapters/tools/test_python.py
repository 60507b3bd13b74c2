"""`@tool`: schemas from type hints, docstrings, context injection, calling."""

from __future__ import annotations

import asyncio
import enum
import threading
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from tests.patience import HANG
from toolrelay.adapters.tools.python import PythonTool, tool
from toolrelay.engine.interfaces import Tool, ToolContext, ToolSpec
from toolrelay.errors import ToolError


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


class Window(TypedDict):
    start: str
    days: int


class Node(BaseModel):
    value: int
    children: list[Node] = []


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --------------------------------------------------------------------------
# Schemas


def test_scalar_parameters_and_defaults() -> None:
    @tool
    def search(query: str, count: int = 5, ratio: float = 0.5, exact: bool = False) -> str:
        return query

    assert search.spec.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "count": {"type": "integer", "default": 5},
            "ratio": {"type": "number", "default": 0.5},
            "exact": {"type": "boolean", "default": False},
        },
        "required": ["query"],
    }


def test_containers_optional_literal_enum() -> None:
    @tool
    def f(
        tags: list[str],
        weights: dict[str, float],
        limit: int | None = None,
        mode: Literal["fast", "slow"] = "fast",
        color: Color = Color.RED,
    ) -> None: ...

    assert f.spec.parameters == {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "weights": {"type": "object", "additionalProperties": {"type": "number"}},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        },
        "required": ["tags", "weights"],
    }


def test_models_and_typed_dicts_are_inlined_without_titles() -> None:
    @tool
    def plot(point: Point, window: Window) -> None: ...

    assert plot.spec.parameters == {
        "type": "object",
        "properties": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
                "required": ["x"],
            },
            "window": {
                "type": "object",
                "properties": {"start": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["start", "days"],
            },
        },
        "required": ["point", "window"],
    }


def test_recursive_model_keeps_defs() -> None:
    @tool
    def walk(tree: Node) -> None: ...

    assert walk.spec.parameters == {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/Node"}},
        "required": ["tree"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "default": []},
                },
                "required": ["value"],
            }
        },
    }


def test_parameters_named_like_pydantic_internals_and_title() -> None:
    @tool
    def f(title: str, json: int = 1, schema: str = "", _private: bool = True) -> None: ...

    assert f.spec.parameters == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "json": {"type": "integer", "default": 1},
            "schema": {"type": "string", "default": ""},
            "_private": {"type": "boolean", "default": True},
        },
        "required": ["title"],
    }


def test_no_parameters_and_unannotated() -> None:
    @tool
    def now() -> str:
        return "t"

    @tool
    def anything(x, y=2):  # type: ignore[no-untyped-def]
        return x

    assert now.spec.parameters == {"type": "object", "properties": {}, "required": []}
    assert anything.spec.parameters == {
        "type": "object",
        "properties": {"x": {}, "y": {"default": 2}},
        "required": ["x"],
    }


def test_context_and_unknown_dunder_params_are_not_in_schema() -> None:
    @tool
    def f(q: str, __user__: dict[str, Any] | None = None, __request__: Any = None) -> None: ...

    assert f.spec.parameters == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }
    assert f.context_params == frozenset({"__user__", "__request__"})


def test_annotated_field_description_is_kept() -> None:
    @tool
    def f(n: Annotated[int, Field(description="how many", ge=1)]) -> None: ...

    assert f.spec.parameters["properties"] == {
        "n": {"type": "integer", "description": "how many", "minimum": 1}
    }


# --------------------------------------------------------------------------
# Docstrings


def test_google_docstring() -> None:
    @tool
    def search(query: str, count: int = 5) -> str:
        """Search the web
        for pages.

        Longer explanation that is not part of the description.

        Args:
            query: What to look for,
                in plain words.
            count (int): How many results.

        Returns:
            The results.
        """
        return query

    assert search.spec.description == "Search the web for pages."
    assert search.spec.parameters["properties"] == {
        "query": {"type": "string", "description": "What to look for, in plain words."},
        "count": {"type": "integer", "default": 5, "description": "How many results."},
    }


def test_sphinx_docstring() -> None:
    @tool
    def search(query: str, count: int = 5) -> str:
        """Search the web.
        :param query: What to look for,
            in plain words.
        :param int count: How many results.
        :returns: The results.
        """
        return query

    assert search.spec.description == "Search the web."
    assert search.spec.parameters["properties"] == {
        "query": {"type": "string", "description": "What to look for, in plain words."},
        "count": {"type": "integer", "default": 5, "description": "How many results."},
    }


def test_numpy_docstring() -> None:
    @tool
    def search(query: str, count: int = 5, lang: str = "en") -> str:
        """Search the web.

        Parameters
        ----------
        query : str
            What to look for,
            in plain words.
        count, lang
            Shared text.

        Returns
        -------
        str
            The results.
        """
        return query

    assert search.spec.description == "Search the web."
    assert search.spec.parameters["properties"] == {
        "query": {"type": "string", "description": "What to look for, in plain words."},
        "count": {"type": "integer", "default": 5, "description": "Shared text."},
        "lang": {"type": "string", "default": "en", "description": "Shared text."},
    }


def test_explicit_name_and_description_win() -> None:
    @tool(name="web_search", description="Find pages.")
    def search(query: str) -> str:
        """Docstring text.

        Args:
            query: the query
        """
        return query

    assert search.spec.name == "web_search"
    assert search.spec.description == "Find pages."
    assert search.spec.parameters["properties"]["query"]["description"] == "the query"


# --------------------------------------------------------------------------
# Spec flags and decorator forms


def test_flags_travel_in_the_spec() -> None:
    @tool(timeout=2.5, sequential=True, requires_approval=True)
    def rm(path: str) -> None: ...

    assert rm.spec == ToolSpec(
        name="rm",
        description="",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        timeout=2.5,
        sequential=True,
        requires_approval=True,
        kind="server",
        filter_arguments=True,
        validates_arguments=True,
    )


def test_bare_decorator_defaults_and_protocol() -> None:
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    assert isinstance(ping, PythonTool)
    assert isinstance(ping, Tool)
    assert (ping.spec.timeout, ping.spec.sequential, ping.spec.requires_approval) == (
        None,
        False,
        False,
    )
    assert ping.__name__ == "ping"
    assert ping.__doc__ == "Answer pong."
    assert ping.spec.openai_spec() == {
        "type": "function",
        "function": {
            "name": "ping",
            "description": "Answer pong.",
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }


def test_invalid_name_and_timeout_are_rejected() -> None:
    with pytest.raises(ValueError, match="must match"):
        tool(lambda: 1)
    with pytest.raises(ValueError, match="must match"):
        tool(name="has space")(lambda: 1)
    with pytest.raises(ValueError, match="timeout must be positive"):
        tool(timeout=0)(test_invalid_name_and_timeout_are_rejected)


def test_still_callable_like_the_function() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    @tool
    async def aadd(a: int, b: int) -> int:
        return a + b

    assert add(2, b=3) == 5
    assert run(aadd(1, 2)) == 3


# --------------------------------------------------------------------------
# Calling


def test_sync_tool_runs_in_a_worker_thread() -> None:
    seen: list[int] = []

    @tool
    def where(x: int) -> int:
        seen.append(threading.get_ident())
        return x * 2

    assert run(where.call({"x": 21}, ToolContext())) == 42
    assert seen != [threading.get_ident()]


def test_async_tool_runs_on_the_loop() -> None:
    @tool
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    assert run(double.call({"x": 4}, ToolContext())) == 8


def test_lax_coercion_and_model_instances() -> None:
    got: dict[str, Any] = {}

    @tool
    def f(n: int, ratio: float, point: Point, window: Window, color: Color) -> None:
        got.update(n=n, ratio=ratio, point=point, window=window, color=color)

    args = {
        "n": "3",
        "ratio": 2,
        "point": {"x": "1"},
        "window": {"start": "mon", "days": "2"},
        "color": "blue",
    }
    run(f.call(args, ToolContext()))
    assert got == {
        "n": 3,
        "ratio": 2.0,
        "point": Point(x=1, y=0),
        "window": {"start": "mon", "days": 2},
        "color": Color.BLUE,
    }
    assert type(got["point"]) is Point


def test_defaults_fill_missing_and_extra_keys_are_ignored() -> None:
    @tool
    def f(a: str, b: int = 7) -> tuple[str, int]:
        return a, b

    assert run(f.call({"a": "x", "zzz": 1}, ToolContext())) == ("x", 7)


def test_validation_error_lists_every_field() -> None:
    @tool
    def f(query: str, count: int, point: Point) -> None: ...

    with pytest.raises(ToolError) as info:
        run(f.call({"count": "many", "point": {"x": "no"}}, ToolContext()))
    assert str(info.value) == (
        "Invalid arguments for tool 'f': query: Field required; "
        "count: Input should be a valid integer, unable to parse string as an integer; "
        "point.x: Input should be a valid integer, unable to parse string as an integer"
    )


def test_only_declared_context_params_are_passed() -> None:
    async def emitter(event: dict[str, Any]) -> None: ...

    async def caller(event: dict[str, Any]) -> Any: ...

    context = ToolContext(
        messages=[{"role": "user", "content": "hi"}],
        files=[{"id": "f1"}],
        user={"id": "u1"},
        metadata={"k": "v"},
        chat_id="c1",
        message_id="m1",
        event_emitter=emitter,
        event_call=caller,
    )

    @tool
    def everything(
        q: str,
        __messages__: Any,
        __files__: Any,
        __user__: Any,
        __metadata__: Any,
        __chat_id__: Any,
        __message_id__: Any,
        __event_emitter__: Any,
        __event_call__: Any,
    ) -> dict[str, Any]:
        return dict(locals())

    assert run(everything.call({"q": "x"}, context)) == {
        "q": "x",
        "__messages__": [{"role": "user", "content": "hi"}],
        "__files__": [{"id": "f1"}],
        "__user__": {"id": "u1"},
        "__metadata__": {"k": "v"},
        "__chat_id__": "c1",
        "__message_id__": "m1",
        "__event_emitter__": emitter,
        "__event_call__": caller,
    }

    @tool
    async def some(__user__: Any, __request__: Any = "default", **kwargs: Any) -> dict[str, Any]:
        return {"user": __user__, "request": __request__, "kwargs": kwargs}

    assert run(some.call({}, context)) == {"user": {"id": "u1"}, "request": None, "kwargs": {}}


def test_model_cannot_supply_context_params() -> None:
    @tool
    def f(__user__: Any = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        return __user__, kwargs

    args = {"__user__": {"id": "admin"}, "__metadata__": {}, "extra": 1}
    assert run(f.call(args, ToolContext(user={"id": "u1"}))) == ({"id": "u1"}, {"extra": 1})


def test_var_keyword_accepts_extra_keys() -> None:
    @tool
    def f(a: int, **options: Any) -> dict[str, Any]:
        return {"a": a, **options}

    assert f.spec.filter_arguments is False
    assert f.spec.parameters == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
    }
    assert run(f.call({"a": "1", "b": [1], "c": None}, ToolContext())) == {
        "a": 1,
        "b": [1],
        "c": None,
    }


def test_positional_only_and_var_positional() -> None:
    @tool
    def f(a: int, /, b: int, *rest: int) -> tuple[int, int, tuple[int, ...]]:
        return a, b, rest

    assert f.spec.parameters["required"] == ["a", "b"]
    assert run(f.call({"a": 1, "b": 2}, ToolContext())) == (1, 2, ())


def test_tool_exceptions_propagate_unchanged() -> None:
    @tool
    def boom() -> None:
        raise KeyError("nope")

    with pytest.raises(KeyError, match="nope"):
        run(boom.call({}, ToolContext()))


def test_cancelling_a_sync_tool_returns_promptly() -> None:
    release = threading.Event()
    finished = threading.Event()

    @tool
    def block() -> str:
        release.wait(HANG)  # released only after the cancelled call has returned
        finished.set()
        return "late"

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(block.call({}, ToolContext()), 0.05)
        assert not finished.is_set()  # the call returned without waiting for the thread
        release.set()

    run(main())
    assert finished.wait(HANG)


def test_async_callable_object() -> None:
    class Echo:
        __name__ = "echo"

        async def __call__(self, text: str) -> str:
            return text

    echo = tool(Echo())
    assert echo.spec.parameters["required"] == ["text"]
    assert run(echo.call({"text": "hi"}, ToolContext())) == "hi"


def test_inline_sync_tools_run_on_the_loop_thread() -> None:
    import threading

    @tool(inline=True)
    def where() -> str:
        """Which thread."""
        return threading.current_thread().name

    @tool
    def elsewhere() -> str:
        """Which thread."""
        return threading.current_thread().name

    async def both() -> tuple[str, str, str]:
        here = threading.current_thread().name
        return here, await where.call({}, ToolContext()), await elsewhere.call({}, ToolContext())

    loop_thread, inline_thread, worker_thread = asyncio.run(both())
    assert inline_thread == loop_thread
    assert worker_thread != loop_thread
