"""Units of the engine that the loop tests reach only on their happy paths."""

from __future__ import annotations

import asyncio

import pytest

from toolrelay import Relay, tool
from toolrelay.engine.interfaces import tools_by_name
from toolrelay.engine.interpreter import SubprocessRunner
from toolrelay.engine.limits import RunLimits
from toolrelay.engine.pending import PendingCalls
from toolrelay.engine.relay import Relay as EngineRelay
from toolrelay.errors import ConfigError
from toolrelay.testing.scripted_model import ScriptedModel

pytestmark = pytest.mark.anyio


async def test_subprocess_runner_output_errors_and_timeout() -> None:
    runner = SubprocessRunner(timeout=5)
    ok = await runner.run("import sys; print('out'); print('err', file=sys.stderr)", "python")
    assert ok == {"stdout": "out\n", "stderr": "err\n", "exit_code": 0}
    failed = await runner.run("raise SystemExit(3)", "py")
    assert failed["exit_code"] == 3
    other = await runner.run("console.log(1)", "javascript")
    assert other["error"] == "Unsupported language: javascript" and other["exit_code"] is None
    slow = await SubprocessRunner(timeout=0.3).run("import time; time.sleep(30)", "python")
    assert slow["error"] == "Execution timed out after 0.3 s."


async def test_pending_answers_before_and_after_the_question() -> None:
    pending = PendingCalls()
    assert pending.resolve("early", 1) is True  # kept until asked for
    assert pending.resolve("early", 2) is False  # an answer is given once
    assert await pending.wait("early", 1) == 1
    waiter = asyncio.create_task(pending.wait("late", 1))
    await asyncio.sleep(0)
    assert pending.resolve("late", "x") is True
    assert await waiter == "x"
    with pytest.raises(TimeoutError):
        await pending.wait("never", 0.01)


def test_run_limits_do_not_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings read CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS once; a RunLimits never does."""
    monkeypatch.setenv("CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS", "abc")
    assert RunLimits().max_iterations == 256


def test_limits_are_checked() -> None:
    with pytest.raises(ConfigError):
        RunLimits(max_iterations=0)
    with pytest.raises(ConfigError):
        RunLimits(max_concurrency=0)
    with pytest.raises(ConfigError):
        RunLimits(on_cap="explode")  # type: ignore[arg-type]
    assert RunLimits(repeat_warn=4).stop_after_repeats == 8
    assert RunLimits(repeat_warn=4, repeat_stop=0).stop_after_repeats == 0


def test_relay_takes_tools_and_names_them_once() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return q

    def plain(q: str) -> str:
        return q

    relay = Relay(ScriptedModel(), [lookup])
    assert relay.tools == {"lookup": lookup}
    with pytest.raises(
        TypeError, match=r"not a tool: .*plain.* \(make a function a tool with @tool\)"
    ):
        EngineRelay(ScriptedModel(), [plain])  # the engine knows no adapters: no @tool for it
    with pytest.raises(ConfigError, match="'tools' defines two tools named 'lookup'"):
        Relay(ScriptedModel(), [lookup, tool(name="lookup")(plain)])


def test_tools_by_name_names_both_places_of_a_clash() -> None:
    first, second = tool(name="t")(lambda: 1), tool(name="t")(lambda: 2)
    assert tools_by_name([("a.py", [first])]) == {"t": first}
    with pytest.raises(ConfigError, match="tools: 't' is defined by both 'a.py' and 'b.py'"):
        tools_by_name([("a.py", [first]), ("b.py", [second])])
