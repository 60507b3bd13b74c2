"""Uploaded files on the local disk, per user (`POST /api/files`).

Layout: `<root>/<user_id>/<file_id>/` holds `data` (the bytes) and
`meta.json` (`FileRecord`). The metadata lives beside the bytes rather than
in the database: the two are written, read and deleted together, and a
file is only ever looked up by its owner. A file attached to a chat message
records the chat (`chat_id`) and goes when the chat is deleted; its owner
can delete it at any time.

Writes go to a temporary name first and are renamed into place, so a reader
never sees half a file. Blocking file work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import orjson

from toolrelay.core.ids import new_id

__all__ = [
    "FileRecord",
    "FileStore",
    "FileTooBig",
    "LocalFiles",
    "NoSuchFile",
    "new_record",
    "over_limit",
    "safe_part",
]

_SAFE_ID: Final = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


class NoSuchFile(Exception):
    """No file of that id for that user."""


class FileTooBig(Exception):
    """The upload would pass a size limit."""


@dataclass(frozen=True, slots=True)
class FileRecord:
    id: str
    user_id: str
    name: str
    mime: str
    size: int
    sha256: str
    created_at: float
    chat_id: str | None = None

    def json(self) -> dict[str, Any]:
        """What the API shows and `__files__` holds (`url` is the content's path)."""
        data = asdict(self)
        data["type"] = "image" if self.mime.startswith("image/") else "file"
        data["url"] = f"/api/files/{self.id}/content"
        return data


class FileStore(Protocol):
    """Where uploads live: `LocalFiles` (the default) or `adapters.s3_files.S3Files`.
    Every method checks the owner; a file not the user's is `NoSuchFile`."""

    async def put(
        self, user_id: str, name: str, mime: str, data: bytes, *, user_limit: int
    ) -> FileRecord: ...

    async def get(self, user_id: str, file_id: str) -> FileRecord: ...

    async def read(self, user_id: str, file_id: str) -> bytes: ...

    async def data_url(self, record: FileRecord) -> str: ...

    async def owned(self, user_id: str) -> list[FileRecord]: ...

    async def attach(self, record: FileRecord, chat_id: str) -> FileRecord: ...

    async def delete(self, user_id: str, file_id: str) -> bool: ...

    async def delete_chat(self, user_id: str, chat_id: str) -> int: ...


def new_record(user_id: str, name: str, mime: str, data: bytes) -> FileRecord:
    """A new upload's record (a fresh id, the cleaned name, size and hash)."""
    return FileRecord(
        id=new_id("file"),
        user_id=user_id,
        name=_clean_name(name),
        mime=mime,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        created_at=time.time(),
    )


def over_limit(existing: list[FileRecord], record: FileRecord, user_limit: int) -> None:
    """`FileTooBig` when the user's files and this one would pass `user_limit`."""
    used = sum(r.size for r in existing)
    if used + record.size > user_limit:
        raise FileTooBig(
            f"Your files would take {used + record.size:,} bytes; the limit is "
            f"{user_limit:,}. Delete some first."
        )


def safe_part(user_id: str, file_id: str) -> str:
    """`user/file` as a path part (directory or object key); `NoSuchFile` for an id that
    could not be one of ours."""
    if not _SAFE_ID.match(file_id) or not _SAFE_ID.match(_user_dir(user_id)):
        raise NoSuchFile(file_id)
    return f"{_user_dir(user_id)}/{file_id}"


class LocalFiles:
    """Files under `root`; every method checks the owner."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _dir(self, user_id: str, file_id: str) -> Path:
        return self.root / safe_part(user_id, file_id)

    async def put(
        self, user_id: str, name: str, mime: str, data: bytes, *, user_limit: int
    ) -> FileRecord:
        record = new_record(user_id, name, mime, data)
        return await asyncio.to_thread(self._put, record, data, user_limit)

    def _put(self, record: FileRecord, data: bytes, user_limit: int) -> FileRecord:
        over_limit(self._list(record.user_id), record, user_limit)
        folder = self._dir(record.user_id, record.id)
        tmp = folder.with_name(folder.name + ".part")
        tmp.mkdir(parents=True)
        (tmp / "data").write_bytes(data)
        (tmp / "meta.json").write_bytes(orjson.dumps(asdict(record)))
        os.replace(tmp, folder)
        return record

    async def get(self, user_id: str, file_id: str) -> FileRecord:
        return await asyncio.to_thread(self._get, user_id, file_id)

    def _get(self, user_id: str, file_id: str) -> FileRecord:
        try:
            raw = (self._dir(user_id, file_id) / "meta.json").read_bytes()
        except FileNotFoundError:
            raise NoSuchFile(file_id) from None
        return FileRecord(**orjson.loads(raw))

    async def read(self, user_id: str, file_id: str) -> bytes:
        return await asyncio.to_thread(self._read, user_id, file_id)

    def _read(self, user_id: str, file_id: str) -> bytes:
        try:
            return (self._dir(user_id, file_id) / "data").read_bytes()
        except FileNotFoundError:
            raise NoSuchFile(file_id) from None

    async def data_url(self, record: FileRecord) -> str:
        data = await self.read(record.user_id, record.id)
        return f"data:{record.mime};base64,{base64.b64encode(data).decode()}"

    async def owned(self, user_id: str) -> list[FileRecord]:
        return await asyncio.to_thread(self._list, user_id)

    def _list(self, user_id: str) -> list[FileRecord]:
        folder = self.root / _user_dir(user_id)
        if not folder.is_dir():
            return []
        found = []
        for meta in folder.glob("*/meta.json"):
            try:
                found.append(FileRecord(**orjson.loads(meta.read_bytes())))
            except (OSError, ValueError, TypeError):
                continue  # being deleted, or not ours
        return sorted(found, key=lambda r: (r.created_at, r.id))

    async def attach(self, record: FileRecord, chat_id: str) -> FileRecord:
        """Record the chat a file was sent in: it is deleted with that chat."""
        if record.chat_id == chat_id:
            return record
        attached = FileRecord(**{**asdict(record), "chat_id": chat_id})
        meta = self._dir(record.user_id, record.id) / "meta.json"
        await asyncio.to_thread(_write_atomic, meta, orjson.dumps(asdict(attached)))
        return attached

    async def delete(self, user_id: str, file_id: str) -> bool:
        return await asyncio.to_thread(self._delete, user_id, file_id)

    def _delete(self, user_id: str, file_id: str) -> bool:
        try:
            folder = self._dir(user_id, file_id)
        except NoSuchFile:
            return False
        if not folder.is_dir():
            return False
        gone = folder.with_name(folder.name + ".gone")
        os.replace(folder, gone)
        shutil.rmtree(gone, ignore_errors=True)
        return True

    async def delete_chat(self, user_id: str, chat_id: str) -> int:
        """Delete the files sent in a chat; how many went."""
        records = await self.owned(user_id)
        gone = 0
        for record in records:
            if record.chat_id == chat_id and await self.delete(user_id, record.id):
                gone += 1
        return gone


def _user_dir(user_id: str) -> str:
    """A user id as a directory name (ids are ours, but never trust a path part)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", user_id)[:80] or "_"


def _clean_name(name: str) -> str:
    base = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    return "".join(c for c in base if c.isprintable())[:200] or "file"


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
