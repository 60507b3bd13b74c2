"""The code interpreter behind the server: `[code_interpreter]`, the gates, files, stop."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.patience import HANG
from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from toolrelay.config.code import CodeInterpreterConfig
from toolrelay.config.settings import ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"


def code_call(code: str) -> SSEReply:
    return SSEReply(chat_chunks(tool_calls=[ToolCallSpec("execute_code", {"code": code})]))


def text(answer: str) -> SSEReply:
    return SSEReply(chat_chunks(text=answer))


@pytest.fixture
def coding(tmp_path: Path, upstream: FakeModelServer) -> Iterator[tuple[Running, ServerThread]]:
    settings = make_settings(
        tmp_path,
        upstream,
        code_interpreter=CodeInterpreterConfig(engine="jupyter", timeout=HANG),
        models=[
            ModelRoute(name="fake", base_url=upstream.base_url, model="fake-model"),
            ModelRoute(
                name="no-code",
                base_url=upstream.base_url,
                model="fake-model",
                code_interpreter=False,
            ),
        ],
    )
    thread = ServerThread(settings)
    with thread as base_url:
        yield Running(base_url, upstream, settings), thread


TOOLS = {"add", "shout", "get_time", "calculator"}
"""The route's tools and the built-in ones: everything but the code tool."""


def offered(request: Any) -> set[str]:
    return {t["function"]["name"] for t in request.json.get("tools", [])}


def ask(
    running: Running, key: str = ADMIN_KEY, model: str = "fake", **extra: Any
) -> dict[str, Any]:
    with running.client(key) as client:
        client.timeout = HANG
        body = {"model": model, "messages": [{"role": "user", "content": "compute"}], **extra}
        answer = client.post(CHAT, json=body)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_native_tool_runs_through_chat_completions(
    coding: tuple[Running, ServerThread],
) -> None:
    running, _ = coding
    running.upstream.route(CHAT, code_call("x = 6 * 7\nprint(x)"), text("It is 42."))
    done = ask(running)
    assert done["choices"][0]["message"]["content"] == "It is 42."
    first, second = running.upstream.requests
    assert "execute_code" in offered(first)
    assert second.json["messages"][-1]["content"] == "stdout:\n42"
    # the same user's next request without a chat finds the same kernel (and `x`)
    running.upstream.route(CHAT, code_call("x + 1"), text("43"))
    ask(running)
    assert running.upstream.requests[-1].json["messages"][-1]["content"] == "result:\n43"


def test_a_route_or_a_user_without_permission_gets_no_code_tool(
    coding: tuple[Running, ServerThread],
) -> None:
    running, _ = coding
    with running.client() as admin:
        bob = admin.post("/api/admin/keys", json={"name": "bob", "user": "bob"}).json()["key"]
    running.upstream.route(CHAT, text("no code here"), text("nor here"), text("nor there"))
    ask(running, model="no-code")
    ask(running, key=bob)
    ask(running, features={"code_interpreter": False})  # the request's own feature switch
    assert [offered(r) for r in running.upstream.requests] == [TOOLS] * 3
    assert "features" not in running.upstream.requests[2].json  # ours, not the upstream's


def test_a_chat_message_may_turn_code_off(coding: tuple[Running, ServerThread]) -> None:
    running, _ = coding
    running.upstream.route(CHAT, text("plain"))
    with running.client() as client:
        chat_id = client.post("/api/chats", json={"model": "fake"}).json()["id"]
        body = {"content": "hi", "features": {"code_interpreter": False}}
        assert client.post(f"/api/chats/{chat_id}/messages", json=body).status_code == 202
        wait_saved(client, chat_id)
    assert offered(running.upstream.requests[0]) == TOOLS


def wait_saved(client: Any, chat_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        messages = client.get(f"/api/chats/{chat_id}").json()["messages"]
        if (
            messages
            and messages[-1]["role"] == "assistant"
            and messages[-1]["status"] != ("in_progress")
        ):
            return dict(messages[-1])
        time.sleep(0.05)
    raise AssertionError("the turn was never saved")


def test_files_a_cell_writes_are_downloadable_by_the_chat_owner_only(
    coding: tuple[Running, ServerThread],
) -> None:
    running, _ = coding
    code = (
        "import os, matplotlib.pyplot as plt\n"
        "open('report.csv', 'w').write('a,b\\n1,2\\n')\n"
        "os.symlink('/etc/passwd', 'passwd')\n"
        "plt.plot([0, 1]); plt.show()\n"
    )
    running.upstream.route(CHAT, code_call(code), text("Wrote it."))
    with running.client() as client:
        chat_id = client.post("/api/chats", json={"model": "fake"}).json()["id"]
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "write"})
        saved = wait_saved(client, chat_id)
        result = next(i for i in saved["output"] if i["type"] == "function_call_output")
        assert result["files"][0]["name"] == "outputs/1.png"
        listed = client.get(f"/api/chats/{chat_id}/files").json()["data"]
        assert [f["name"] for f in listed] == ["outputs/1.png", "report.csv"]
        csv = client.get(f"/api/chats/{chat_id}/files/report.csv")
        assert csv.content == b"a,b\n1,2\n"
        assert csv.headers["content-disposition"].startswith("attachment")
        png = client.get(f"/api/chats/{chat_id}/files/outputs/1.png")
        assert png.headers["content-type"] == "image/png" and png.content[:4] == b"\x89PNG"
        for bad in ("passwd", "../../etc/passwd", ".ipython/profile_default", "nothing"):
            assert client.get(f"/api/chats/{chat_id}/files/{bad}").status_code == 404, bad
        bob = client.post("/api/admin/keys", json={"name": "bob", "user": "bob"}).json()["key"]
    with running.client(bob) as other:
        assert other.get(f"/api/chats/{chat_id}/files/report.csv").status_code == 404
    workdir = running.settings.data_dir / "code" / chat_id
    assert (workdir / "report.csv").is_file()
    with running.client() as client:
        assert client.delete(f"/api/chats/{chat_id}").status_code == 204
    assert not workdir.exists()  # deleting the chat removes what its code wrote


def test_server_stop_shuts_every_kernel_down(coding: tuple[Running, ServerThread]) -> None:
    running, thread = coding
    running.upstream.route(CHAT, code_call("1"), text("one"))
    ask(running)
    app: Any = thread.server.config.app
    pool = app.state.services.registry.code_runner.pool
    [kernel] = pool._kernels.values()
    pid = kernel.manager.provisioner.pid
    thread.__exit__(None, None, None)
    assert pool.running() == []
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)
