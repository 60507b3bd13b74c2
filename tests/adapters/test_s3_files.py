"""Files in an S3-compatible store (`adapters.s3_files`) against a real local S3 server
(moto's), the same behaviour as on the disk (`LocalFiles`); and our request signing
against AWS's published Signature Version 4 example."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.s3_server import S3Server, s3_server  # noqa: F401  (a fixture)
from toolrelay.adapters.files import FileStore, FileTooBig, LocalFiles, NoSuchFile
from toolrelay.adapters.http.aio import AiohttpTransport
from toolrelay.adapters.s3_files import EMPTY_SHA256, S3Error, S3Files, S3Place, sign

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["local", "s3"])
async def files(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    s3_server: S3Server,  # noqa: F811
) -> AsyncIterator[FileStore]:
    if request.param == "local":
        yield LocalFiles(tmp_path / "files")
        return
    store = S3Files(s3_server.bucket(), AiohttpTransport())
    try:
        yield store
    finally:
        await store.aclose()


def test_the_signature_is_aws_published_example() -> None:
    """docs.aws.amazon.com, "Signature Calculations for the Authorization Header",
    Example: GET Object (the first 10 bytes of examplebucket's test.txt)."""
    headers = sign(
        "GET",
        "https://examplebucket.s3.amazonaws.com/test.txt",
        {"Range": "bytes=0-9"},
        payload_sha256=EMPTY_SHA256,
        access_key="AKIAIOSFODNN7EXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        region="us-east-1",
        now=datetime(2013, 5, 24, tzinfo=UTC),
    )
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


async def test_files_are_kept_per_user_and_go_with_their_chat(files: FileStore) -> None:
    note = await files.put("u1", "../a b.txt", "text/plain", b"argon", user_limit=100)
    image = await files.put("u1", "x.png", "image/png", b"\x89PNG", user_limit=100)
    assert note.name == "a b.txt" and note.size == 5
    assert await files.get("u1", note.id) == note
    assert await files.read("u1", note.id) == b"argon"
    assert await files.data_url(image) == "data:image/png;base64,iVBORw=="
    assert [r.id for r in await files.owned("u1")] == [note.id, image.id]
    assert await files.owned("u2") == []
    with pytest.raises(NoSuchFile):
        await files.get("u2", note.id)  # another user's
    with pytest.raises(NoSuchFile):
        await files.read("u1", "../etc")
    with pytest.raises(FileTooBig):
        await files.put("u1", "big", "text/plain", b"x" * 92, user_limit=100)
    attached = await files.attach(note, "chat_1")
    assert (await files.get("u1", note.id)).chat_id == "chat_1" == attached.chat_id
    assert await files.delete_chat("u1", "chat_1") == 1
    assert [r.id for r in await files.owned("u1")] == [image.id]
    assert await files.delete("u1", image.id) and not await files.delete("u1", image.id)
    assert await files.owned("u1") == []


async def test_a_missing_bucket_is_an_error_that_says_so(s3_server: S3Server) -> None:  # noqa: F811
    place = s3_server.bucket()
    store = S3Files(S3Place(place.endpoint, "no-such-bucket", "k", "s"), AiohttpTransport())
    try:
        with pytest.raises(S3Error):
            await store.put("u1", "a", "text/plain", b"x", user_limit=10)
    finally:
        await store.aclose()
