"""Issue 29 item 1 through a running server: uploads (`/api/files`: types, sizes, per user),
files and sources sent with a message (chat API and `/v1`), what the model and the tools
get of them (R15 context, `source` events, images as image parts), and deletion."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.s3_server import KEY_ENV, SECRET_ENV, S3Server, s3_server  # noqa: F401  (a fixture)
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.adapters.s3_files import EMPTY_SHA256, sign
from toolrelay.config.files import FilesConfig, S3Config
from toolrelay.config.settings import ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture(params=["disk", "s3"])
def filing(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    upstream: FakeModelServer,
    s3_server: S3Server,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Running]:
    """The server keeping files on the disk, or in a real local S3 server's bucket."""
    routes = [
        ModelRoute(name="fake", base_url=upstream.base_url, model="m"),
        ModelRoute(name="blind", base_url=upstream.base_url, model="m", vision=False),
    ]
    s3 = None
    if request.param == "s3":
        place = s3_server.bucket()
        monkeypatch.setenv(KEY_ENV, place.access_key)
        monkeypatch.setenv(SECRET_ENV, place.secret_key)
        s3 = S3Config(
            endpoint=place.endpoint,
            bucket=place.bucket,
            prefix="toolrelay/",
            access_key_env=KEY_ENV,
            secret_key_env=SECRET_ENV,
        )
    files = FilesConfig(max_bytes=2000, max_user_bytes=5000, s3=s3)
    settings = make_settings(tmp_path, upstream, models=routes, files=files)
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def _upload(client: httpx2.Client, name: str, mime: str, data: bytes) -> httpx2.Response:
    return client.post(
        "/api/files", params={"name": name}, content=data, headers={"Content-Type": mime}
    )


def _uploaded(client: httpx2.Client, name: str, mime: str, data: bytes) -> dict[str, Any]:
    answer = _upload(client, name, mime, data)
    assert answer.status_code == 201, answer.text
    record: dict[str, Any] = answer.json()
    return record


def test_uploads_are_checked_and_kept_per_user(filing: Running) -> None:
    with filing.client() as client:
        note = _uploaded(client, "../notes.txt", "text/plain; charset=utf-8", b"argon is inert")
        assert note["name"] == "notes.txt" and note["size"] == 14 and note["type"] == "file"
        assert client.get(f"/api/files/{note['id']}/content").content == b"argon is inert"
        assert [f["id"] for f in client.get("/api/files").json()["data"]] == [note["id"]]

        wrong = _upload(client, "x.exe", "application/x-msdownload", b"MZ")
        assert wrong.status_code == 415 and "not accepted" in wrong.json()["error"]["message"]
        big = _upload(client, "big.txt", "text/plain", b"x" * 2001)
        assert big.status_code == 413 and "2,000" in big.json()["error"]["message"]
        for i in range(2):
            _uploaded(client, f"fill{i}.txt", "text/plain", b"y" * 2000)
        full = _upload(client, "more.txt", "text/plain", b"z" * 1000)
        assert full.status_code == 413 and full.json()["error"]["code"] == "user_quota"

        key = client.post("/api/admin/keys", json={"name": "bob", "user": "bob"}).json()["key"]
    with filing.client(key) as bob:
        assert bob.get(f"/api/files/{note['id']}").status_code == 404  # not bob's
        assert bob.get(f"/api/files/{note['id']}/content").status_code == 404
        assert bob.get("/api/files").json()["data"] == []
        chat_id = new_chat(bob, model="fake")
        stolen = bob.post(
            f"/api/chats/{chat_id}/messages", json={"content": "hi", "files": [note["id"]]}
        )
        assert stolen.status_code == 404
    with filing.client() as client:
        assert client.delete(f"/api/files/{note['id']}").status_code == 204
        assert client.get(f"/api/files/{note['id']}").status_code == 404


def test_a_message_with_files_and_sources(filing: Running) -> None:
    filing.upstream.set_default(SSEReply(chat_chunks(text="Argon [1].")))
    source = {
        "source": {"id": "kb1", "name": "Gas handbook"},
        "document": ["Noble gases have full shells."],
        "metadata": [{"source": "kb1", "name": "Gas handbook"}],
    }
    with filing.client() as client:
        note = _uploaded(client, "notes.txt", "text/plain", b"argon is inert")
        image = _uploaded(client, "dot.png", "image/png", PNG)
        kept = _uploaded(client, "kept.txt", "text/plain", b"not sent")
        chat_id = new_chat(client, model="fake")
        posted = client.post(
            f"/api/chats/{chat_id}/messages",
            json={
                "content": "what is argon?",
                "files": [note["id"], {"id": image["id"]}],
                "sources": [source],
            },
        )
        assert posted.status_code == 202, posted.text
        events = [e for _, e in read_events(client, chat_id, last=0)]
        wait_saved(client, chat_id)

        sent = filing.upstream.requests[-1].json["messages"]
        user = sent[-1]
        text = "".join(p.get("text", "") for p in user["content"] if p["type"] == "text")
        assert "argon is inert" in text and "Noble gases have full shells." in text
        assert text.count("<source") == 2 and text.endswith("what is argon?")
        images = [p for p in user["content"] if p["type"] == "image_url"]
        assert (
            images[0]["image_url"]["url"]
            == "data:image/png;base64," + base64.b64encode(PNG).decode()
        )
        shown = [e["data"]["source"]["name"] for e in events if e["type"] == "source"]
        assert shown == ["Gas handbook", "notes.txt"]

        # deleting the chat deletes the files sent in it, not the others
        assert client.delete(f"/api/chats/{chat_id}").status_code == 204
        assert client.get(f"/api/files/{note['id']}").status_code == 404
        assert client.get(f"/api/files/{image['id']}").status_code == 404
        assert client.get(f"/api/files/{kept['id']}").status_code == 200


def test_the_openai_api_takes_files_and_a_blind_model_gets_names(filing: Running) -> None:
    filing.upstream.set_default(SSEReply(chat_chunks(text="ok")))
    with filing.client() as client:
        note = _uploaded(client, "notes.txt", "text/plain", b"krypton glows")
        image = _uploaded(client, "dot.png", "image/png", PNG)
        answer = client.post(
            "/v1/chat/completions",
            json={
                "model": "blind",
                "messages": [{"role": "user", "content": "look"}],
                "files": [note["id"], image["id"]],
            },
        )
        assert answer.status_code == 200, answer.text
        missing = client.post(
            "/v1/chat/completions",
            json={
                "model": "fake",
                "messages": [{"role": "user", "content": "x"}],
                "files": ["file_nope"],
            },
        )
        assert missing.status_code == 404
    user = filing.upstream.requests[-1].json["messages"][-1]
    text = "".join(p.get("text", "") for p in user["content"] if p["type"] == "text")
    assert "krypton glows" in text and "dot.png" in text
    assert not [p for p in user["content"] if p["type"] == "image_url"]
    assert "files" not in filing.upstream.requests[-1].json  # an extension, not sent upstream


def test_the_bytes_are_where_the_settings_say(filing: Running) -> None:
    """On the disk under data_dir/files, or as objects in the bucket (and not on the disk)."""
    with filing.client() as client:
        record = _uploaded(client, "where.txt", "text/plain", b"here")
    s3 = filing.settings.files.s3
    on_disk = list((filing.settings.data_dir / "files").glob(f"*/{record['id']}/data"))
    if s3 is None:
        assert [p.read_bytes() for p in on_disk] == [b"here"]
        return
    assert on_disk == []
    place = s3.place()
    url = f"{place.endpoint}/{place.bucket}/{place.prefix}{object_key(record)}"
    headers = sign(
        "GET", url, {}, payload_sha256=EMPTY_SHA256, access_key=place.access_key,
        secret_key=place.secret_key, region=place.region, now=datetime.now(UTC),
    )  # fmt: skip
    headers.pop("host")
    assert httpx2.get(url, headers=headers).content == b"here"


def object_key(record: dict[str, Any]) -> str:
    return f"{record['user_id']}/{record['id']}/data"
