"""`execute_code` and the turn's code budget, on a recording runner (no kernel)."""

from __future__ import annotations

from typing import Any

import pytest

from toolrelay import Relay, RunLimits
from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.engine.interpreter import CodeJob
from toolrelay.testing.scripted_model import ScriptedModel, reply

pytestmark = pytest.mark.anyio

TAG = '<code_interpreter type="code" lang="python">print(2)</code_interpreter>'


class Recorder:
    def __init__(self) -> None:
        self.jobs: list[tuple[str, CodeJob]] = []

    async def run(self, code: str, lang: str, job: CodeJob | None = None) -> dict[str, Any]:
        assert job is not None
        self.jobs.append((code, job))
        if job.on_output is not None:
            await job.on_output({"kind": "stdout", "text": "x\n"})
        return {"stdout": "x\n", "stderr": ""}


def call(arguments: dict[str, Any]) -> bytes:
    return reply(calls=[("execute_code", arguments)])


async def test_both_forms_share_one_budget_per_turn() -> None:
    runner = Recorder()
    model = ScriptedModel(call({"code": "print(1)"}), reply(TAG), reply(TAG))
    relay = Relay(
        model, code_interpreter=runner, tags=TagConfig(), limits=RunLimits(interpreter_retries=2)
    )
    result = await relay.run("go")
    assert [code for code, _ in runner.jobs] == ["print(1)", "print(2)"]
    assert len(model.requests) == 3  # the third block stays unrun: the budget is spent
    assert result.status == "completed"


async def test_a_call_names_its_chat_call_id_and_timeout() -> None:
    runner = Recorder()
    model = ScriptedModel(call({"code": "1", "timeout": 7}), reply("ok"))
    await Relay(model, code_interpreter=runner).run("go", chat_id="c9")
    [(_, job)] = runner.jobs
    assert (job.session, job.timeout) == ("c9", 7.0)
    assert job.call_id is not None and job.call_id.startswith("call")
    without_chat = ScriptedModel(call({"code": "1"}), reply("ok"))
    await Relay(without_chat, code_interpreter=runner).run("go", user={"id": "u7", "role": "admin"})
    assert runner.jobs[-1][1].session == "user-u7"  # a stateless request: the user's own kernel


async def test_bad_code_arguments_are_a_result_for_the_model() -> None:
    runner = Recorder()
    model = ScriptedModel(call({"code": "   "}), reply("ok"))
    await Relay(model, code_interpreter=runner).run("go")
    assert runner.jobs == []
    sent = [dict(i) for i in model.requests[1].output]
    assert sent[-1]["output"] == "Error: `code` must be a non-empty string of Python."
