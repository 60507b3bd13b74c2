"""The code interpreter through the loop, on a real kernel: both forms, state, cap, cancel."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.patience import HANG
from toolrelay import Relay, RunLimits
from toolrelay.adapters.code import JupyterRunner
from toolrelay.core import events as ev
from toolrelay.core.formats.transcript import CODE_IMAGES_TEXT, to_chat_messages, to_responses_input
from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio

MAY_RUN_CODE = {"id": "u1", "role": "user", "permissions": {"features": {"code_interpreter": True}}}


@pytest.fixture(scope="module")
async def runner(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[JupyterRunner]:
    run = JupyterRunner(tmp_path_factory.mktemp("loop"), timeout=HANG)
    yield run
    await run.aclose()


def code_call(code: str, **extra: Any) -> bytes:
    return reply(calls=[("execute_code", {"code": code, **extra})])


def plain(items: Any) -> list[dict[str, Any]]:
    """Items as plain dicts (the tests read keys of several kinds)."""
    return [dict(i) for i in items]


def tool_outputs(request: ModelRequest) -> list[Any]:
    return [i["output"] for i in plain(request.output) if i.get("type") == "function_call_output"]


async def test_state_lasts_across_two_turns_of_a_chat(runner: JupyterRunner) -> None:
    model = ScriptedModel(
        code_call("answer = 6 * 7"),
        reply("Stored."),
        code_call("print(answer)"),
        reply("It is 42."),
    )
    relay = Relay(model, code_interpreter=runner, tags=None)
    first = await relay.run("store it", chat_id="turns")
    second = await relay.run("show it", chat_id="turns")
    assert first.status == second.status == "completed"
    assert "execute_code" in [t["function"]["name"] for t in model.requests[0].tools]
    assert tool_outputs(model.requests[3]) == ["stdout:\n42"]


async def test_an_image_reaches_the_model_and_the_client(runner: JupyterRunner) -> None:
    code = "import matplotlib.pyplot as plt\nplt.bar([1, 2], [3, 4])\nplt.show()"
    model = ScriptedModel(code_call(code), reply("A bar chart."))
    sink = ListSink()
    result = await Relay(model, code_interpreter=runner).run("plot", chat_id="shared", sink=sink)
    [parts] = tool_outputs(model.requests[1])
    assert parts[0]["type"] == "input_text" and "files shown: outputs/1.png" in parts[0]["text"]
    assert parts[1]["type"] == "input_image"
    assert parts[1]["image_url"].startswith("data:image/png;base64,")
    output = next(i for i in plain(result.output) if i["type"] == "function_call_output")
    assert output["files"][0]["name"] == "outputs/1.png"
    call_id = output["call_id"]
    live = [e.data for e in sink.of(ev.CODE_OUTPUT)]
    assert {
        "call_id": call_id,
        "kind": "display",
        "mime": "image/png",
        "name": "outputs/1.png",
    } in live
    assert (runner.workdir("shared") / "outputs" / "1.png").is_file()


async def test_runs_per_turn_are_capped(runner: JupyterRunner) -> None:
    model = ScriptedModel(
        code_call("print(1)"), code_call("print(2)"), code_call("print(3)"), reply("done")
    )
    relay = Relay(model, code_interpreter=runner, limits=RunLimits(interpreter_retries=2))
    await relay.run("go", chat_id="shared")
    assert tool_outputs(model.requests[3]) == [
        "stdout:\n1",
        "stdout:\n2",
        "Error: the code interpreter already ran 2 times in this turn (the limit); "
        "answer with what you have.",
    ]


CODE_TAG = '<code_interpreter type="code" lang="python">print(sum(range(10)))</code_interpreter>'


async def test_the_inline_tag_runs_on_the_kernel_when_every_gate_is_open(
    runner: JupyterRunner,
) -> None:
    model = ScriptedModel(reply(CODE_TAG), reply("45."))
    sink = ListSink()
    relay = Relay(
        model, code_interpreter=runner, tags=TagConfig(), capabilities={"code_interpreter": True}
    )
    result = await relay.run(
        "sum", chat_id="shared", user=MAY_RUN_CODE, features={"code_interpreter": True}, sink=sink
    )
    block = plain(result.output)[0]
    assert block["type"] == "code_interpreter"
    assert block["output"] == {"stdout": "45\n", "stderr": "", "result": None}
    assert {"call_id": block["id"], "kind": "stdout", "text": "45\n"} in [
        e.data for e in sink.of(ev.CODE_OUTPUT)
    ]
    replayed = plain(model.requests[1].output)[0]
    assert replayed["output"]["stdout"] == "45\n"


@pytest.mark.parametrize(
    ("relay_args", "run_args"),
    [
        ({}, {"user": MAY_RUN_CODE, "features": {"code_interpreter": False}}),
        ({"builtin_tools": {"code_interpreter": False}}, {"user": MAY_RUN_CODE}),
        ({"capabilities": {"code_interpreter": False}}, {"user": MAY_RUN_CODE}),
        ({}, {"user": {"id": "u2", "role": "user"}}),
    ],
    ids=["not-requested", "route-builtin-tools-off", "model-not-capable", "user-not-permitted"],
)
async def test_a_closed_gate_closes_both_forms(
    runner: JupyterRunner, relay_args: dict[str, Any], run_args: dict[str, Any]
) -> None:
    model = ScriptedModel(reply(CODE_TAG))
    relay = Relay(model, code_interpreter=runner, tags=TagConfig(), **relay_args)
    result = await relay.run("sum", chat_id="closed", **run_args)
    assert [i["type"] for i in result.output] == ["message"]  # the tag stayed text
    assert model.requests[0].tools == []  # and no execute_code tool was offered
    assert "closed" not in runner.pool.running()  # no kernel was started


async def test_cancelling_the_turn_interrupts_the_running_cell(runner: JupyterRunner) -> None:
    loop_forever = "import time\nprint('working', flush=True)\nwhile True:\n    time.sleep(0.01)"
    model = ScriptedModel(code_call("kept = 1"), reply("ok"), code_call(loop_forever))
    relay = Relay(model, code_interpreter=runner)
    await relay.run("set", chat_id="cancel")
    sink = ListSink()
    task = asyncio.get_running_loop().create_task(relay.run("spin", chat_id="cancel", sink=sink))
    await sink.wait_for(ev.CODE_OUTPUT, limit=HANG)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    model.add(code_call("kept + 1"), reply("2"))
    async with asyncio.timeout(HANG):  # the kernel is free: the loop was interrupted
        await relay.run("again", chat_id="cancel")
    assert tool_outputs(model.requests[-1]) == ["result:\n2"]


PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()"
PNG = b"\x89PNG\r\n\x1a\n"


def model_images(request: ModelRequest) -> list[str]:
    """The image URLs the model is sent next, as the Chat Completions client builds them."""
    return [
        part["image_url"]["url"]
        for message in to_chat_messages(request.output)
        if message["role"] == "user" and isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]


@pytest.mark.parametrize("form", ["inline-tag", "execute_code"])
async def test_both_forms_show_the_model_a_plot_as_an_image(
    runner: JupyterRunner, form: str
) -> None:
    """R12 for either form: the cell's PNG reaches the model as an image; the client and
    the saved turn get its name only (the image is downloaded from the chat)."""
    if form == "inline-tag":
        first = reply(f'<code_interpreter type="code" lang="python">{PLOT}</code_interpreter>')
        relay_args: dict[str, Any] = {
            "tags": TagConfig(),
            "capabilities": {"code_interpreter": True},
        }
        run_args: dict[str, Any] = {"user": MAY_RUN_CODE, "features": {"code_interpreter": True}}
    else:
        first, relay_args, run_args = code_call(PLOT), {}, {}
    model = ScriptedModel(first, reply("A line."))
    sink = ListSink()
    relay = Relay(model, code_interpreter=runner, **relay_args)
    result = await relay.run("plot", chat_id=f"plot-{form}", sink=sink, **run_args)
    assert result.status == "completed"
    [image] = model_images(model.requests[1])
    head, _, data = image.partition(",")
    assert head == "data:image/png;base64" and base64.b64decode(data).startswith(PNG)
    if form == "inline-tag":  # the Responses API form of the same request agrees
        [follow_up] = [
            i for i in to_responses_input(model.requests[1].output) if i.get("role") == "user"
        ]
        assert follow_up["content"][0] == {"type": "input_text", "text": CODE_IMAGES_TEXT}
        assert follow_up["content"][1] == {"type": "input_image", "image_url": image}
        block = plain(result.output)[0]
        assert block["type"] == "code_interpreter"
        assert block["output"]["files"] == [
            {"type": "image", "mime_type": "image/png", "name": block["output"]["files"][0]["name"]}
        ]
        shown = [e.data["item"] for e in sink.of(ev.OUTPUT_ITEM_DONE)]
        assert "data:image" not in repr(shown) and "data:image" not in repr(result.output)
