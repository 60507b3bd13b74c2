"""Uploaded files in an S3-compatible object store (`[files.s3]`; issue 29 item 1).

The same layout as `LocalFiles`, as object keys: `<prefix><user>/<file id>/data`
holds the bytes and `<prefix><user>/<file id>/meta.json` the `FileRecord`. The
metadata is written after the bytes and deleted before them, so a listing (by
`meta.json`) never shows a file that is not all there. Requests are plain S3 REST
calls (path-style: `<endpoint>/<bucket>/<key>`, which MinIO, Ceph, moto and AWS
accept) signed with AWS Signature Version 4 (`sign`), over the process's one HTTP
seam (`adapters.http`): no SDK, no new dependency.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Final
from urllib.parse import quote, urlsplit
from xml.etree import ElementTree

import orjson

from toolrelay.adapters.files import (
    FileRecord,
    NoSuchFile,
    new_record,
    over_limit,
    safe_part,
)
from toolrelay.adapters.http.fetch import Answer, fetch
from toolrelay.adapters.http.seam import Request, Transport

__all__ = ["S3Error", "S3Files", "S3Place", "sign"]

EMPTY_SHA256: Final = hashlib.sha256(b"").hexdigest()
MAX_OBJECT_BYTES: Final = 1 << 31
"""An object read whole: uploads are bounded by `[files] max_bytes` when written."""
_S3_NS: Final = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class S3Error(Exception):
    """The object store answered with an error (its status and message)."""


@dataclass(frozen=True, slots=True)
class S3Place:
    """Where the files go and the key that signs for them."""

    endpoint: str
    """`https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:9000` (MinIO) …"""
    bucket: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"
    prefix: str = ""
    """Keys start with it (`toolrelay/`): one bucket can hold other things too."""


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    *,
    payload_sha256: str,
    access_key: str,
    secret_key: str,
    region: str,
    now: datetime,
    service: str = "s3",
) -> dict[str, str]:
    """The request's headers plus `host`, `x-amz-date`, `x-amz-content-sha256` and the
    `authorization` of AWS Signature Version 4 (header-based). `url`'s path is used as
    it is (already percent-encoded, as S3 wants it: each key part once)."""
    parts = urlsplit(url)
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    signed = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    signed |= {"host": parts.netloc, "x-amz-date": stamp, "x-amz-content-sha256": payload_sha256}
    names = sorted(signed)
    query = "&".join(
        sorted(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
            for k, _, v in (pair.partition("=") for pair in parts.query.split("&") if pair)
        )
    )
    canonical = "\n".join(
        [
            method,
            parts.path or "/",
            query,
            "".join(f"{n}:{signed[n]}\n" for n in names),
            ";".join(names),
            payload_sha256,
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _hmac(("AWS4" + secret_key).encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return signed


class S3Files:
    """`FileStore` on one bucket (module doc); `transport` sends its requests."""

    def __init__(self, place: S3Place, transport: Transport) -> None:
        self.place = place
        self._transport = transport

    def _url(self, key: str | None, query: str = "") -> str:
        """An object's URL (`key` under the prefix), or the bucket's (None)."""
        base = self.place.endpoint.rstrip("/")
        name = self.place.bucket if key is None else f"{self.place.bucket}/{self.place.prefix}{key}"
        path = quote(name, safe="/-_.~")
        return f"{base}/{path}" + (f"?{query}" if query else "")

    async def _call(
        self,
        method: str,
        key: str | None,
        body: bytes = b"",
        *,
        query: str = "",
        mime: str = "",
    ) -> Answer:
        url = self._url(key, query)
        headers = {"content-type": mime} if mime else {}
        digest = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
        p = self.place
        signed = sign(
            method, url, headers, payload_sha256=digest, access_key=p.access_key,
            secret_key=p.secret_key, region=p.region, now=datetime.now(UTC),
        )  # fmt: skip
        signed.pop("host")  # the transport writes it from the URL
        request = Request(method, url, signed, body)
        answer = await fetch(self._transport, request, max_bytes=MAX_OBJECT_BYTES)
        if answer.status >= 300 and answer.status != 404:
            raise S3Error(f"{method} {key}: {answer.status} {_message(answer.body)}")
        return answer

    async def put(
        self, user_id: str, name: str, mime: str, data: bytes, *, user_limit: int
    ) -> FileRecord:
        record = new_record(user_id, name, mime, data)
        over_limit(await self.owned(user_id), record, user_limit)
        folder = safe_part(user_id, record.id)
        await self._call("PUT", f"{folder}/data", data, mime="application/octet-stream")
        await self._write_meta(record)
        return record

    async def _write_meta(self, record: FileRecord) -> None:
        folder = safe_part(record.user_id, record.id)
        meta = orjson.dumps(asdict(record))
        await self._call("PUT", f"{folder}/meta.json", meta, mime="application/json")

    async def get(self, user_id: str, file_id: str) -> FileRecord:
        answer = await self._call("GET", f"{safe_part(user_id, file_id)}/meta.json")
        if answer.status == 404:
            raise NoSuchFile(file_id)
        return FileRecord(**orjson.loads(answer.body))

    async def read(self, user_id: str, file_id: str) -> bytes:
        answer = await self._call("GET", f"{safe_part(user_id, file_id)}/data")
        if answer.status == 404:
            raise NoSuchFile(file_id)
        return answer.body

    async def data_url(self, record: FileRecord) -> str:
        data = await self.read(record.user_id, record.id)
        return f"data:{record.mime};base64,{base64.b64encode(data).decode()}"

    async def owned(self, user_id: str) -> list[FileRecord]:
        folder = safe_part(user_id, "x").rsplit("/", 1)[0] + "/"
        found: list[FileRecord] = []
        for key in await self._keys(folder):
            if key.endswith("/meta.json"):
                file_id = key.removesuffix("/meta.json").rsplit("/", 1)[-1]
                try:
                    found.append(await self.get(user_id, file_id))
                except (NoSuchFile, ValueError, TypeError):
                    continue  # being deleted, or not ours
        return sorted(found, key=lambda r: (r.created_at, r.id))

    async def _keys(self, folder: str) -> list[str]:
        """Every key under `<prefix><folder>`, without the prefix (ListObjectsV2 pages)."""
        keys: list[str] = []
        token = ""
        full = self.place.prefix + folder
        while True:
            query = f"list-type=2&prefix={quote(full, safe='-_.~')}"
            if token:
                query += f"&continuation-token={quote(token, safe='-_.~')}"
            answer = await self._call("GET", None, query=query)
            if answer.status == 404:
                raise S3Error(f"no bucket {self.place.bucket!r}")
            root = ElementTree.fromstring(answer.body)
            for node in root.iter(f"{_S3_NS}Key"):
                keys.append((node.text or "").removeprefix(self.place.prefix))
            token = root.findtext(f"{_S3_NS}NextContinuationToken") or ""
            if root.findtext(f"{_S3_NS}IsTruncated") != "true" or not token:
                return keys

    async def attach(self, record: FileRecord, chat_id: str) -> FileRecord:
        """Record the chat a file was sent in: it is deleted with that chat."""
        if record.chat_id == chat_id:
            return record
        attached = FileRecord(**{**asdict(record), "chat_id": chat_id})
        await self._write_meta(attached)
        return attached

    async def delete(self, user_id: str, file_id: str) -> bool:
        try:
            folder = safe_part(user_id, file_id)
        except NoSuchFile:
            return False
        if (await self._call("GET", f"{folder}/meta.json")).status == 404:
            return False
        await self._call("DELETE", f"{folder}/meta.json")  # first: unlisted at once
        await self._call("DELETE", f"{folder}/data")
        return True

    async def delete_chat(self, user_id: str, chat_id: str) -> int:
        """Delete the files sent in a chat; how many went."""
        gone = 0
        for record in await self.owned(user_id):
            if record.chat_id == chat_id and await self.delete(user_id, record.id):
                gone += 1
        return gone

    async def aclose(self) -> None:
        await self._transport.aclose()


def _message(body: bytes) -> str:
    """The `<Message>` of an S3 error body, else its start."""
    try:
        return ElementTree.fromstring(body).findtext("Message") or body[:200].decode(
            errors="replace"
        )
    except ElementTree.ParseError:
        return body[:200].decode(errors="replace")
