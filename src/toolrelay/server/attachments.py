"""Files and sources sent with a message, made ready for a turn (chat API and `/v1`).

Resolves file references against the caller's own files (`adapters.files`),
records the chat they were sent in (so they go with it), and returns the user
message (images added per `core.prompt.attachments.with_images`) and the `Relay.run`
arguments: `files` (`__files__`) and `sources` (text files and the given
sources, R15). A reference to a file that is not the caller's is a 404, a
malformed one a 400; nothing is attached then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolrelay.adapters.files import FileRecord, FileStore, NoSuchFile
from toolrelay.core.prompt.attachments import file_source, is_text, with_images
from toolrelay.server.error_responses import APIError

__all__ = ["Attached", "attach", "attach_last"]

Attached = tuple[dict[str, Any], dict[str, Any]]
"""(the user message, `Relay.run` keyword arguments)."""


def _file_id(ref: Any) -> str:
    value = ref.get("id") if isinstance(ref, Mapping) else ref
    if not isinstance(value, str) or not value:
        raise APIError(400, "Each of `files` is a file id or {id}.", param="files")
    return value


def _checked_sources(sources: Sequence[Any]) -> list[dict[str, Any]]:
    found = []
    for source in sources:
        if not isinstance(source, Mapping) or not isinstance(source.get("document"), list):
            raise APIError(
                400,
                "Each of `sources` is {source, document: [...], metadata: [...]}.",
                param="sources",
            )
        found.append(dict(source))
    return found


async def attach(
    files: FileStore,
    user_id: str,
    message: Mapping[str, Any],
    refs: Sequence[Any] | None,
    sources: Sequence[Any] | None,
    *,
    chat_id: str | None,
    vision: bool,
    text_limit: int,
) -> Attached:
    given = _checked_sources(sources or ())
    records: list[FileRecord] = []
    for ref in refs or ():
        try:
            records.append(await files.get(user_id, _file_id(ref)))
        except NoSuchFile:
            raise APIError(
                404, f"No file '{_file_id(ref)}'.", param="files", code="file_not_found"
            ) from None
    found: list[dict[str, Any]] = []
    images: list[tuple[str, str]] = []
    for record in records:
        if chat_id is not None:
            record = await files.attach(record, chat_id)
        found.append(record.json())
        if record.mime.startswith("image/"):
            url = await files.data_url(record) if vision else ""
            images.append((record.name, url))
        elif is_text(record.mime):
            text = (await files.read(user_id, record.id)).decode("utf-8", errors="replace")
            given.append(file_source(record.json(), text, text_limit))
    kwargs: dict[str, Any] = {}
    if found:
        kwargs["files"] = found
    if given:
        kwargs["sources"] = given
    return with_images(message, images, vision=vision), kwargs


async def attach_last(
    svc: Any, user_id: str, route: str, messages: list[dict[str, Any]], body: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`/v1`: the body's `files` and `sources` on its last user message (no chat: the
    files stay the caller's until deleted)."""
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "user"), None
    )
    if last is None:
        raise APIError(400, "`files` need a user message to go with.", param="files")
    message, kwargs = await attach(
        svc.files,
        user_id,
        messages[last],
        body.files,
        body.sources,
        chat_id=None,
        vision=svc.registry.routes[route].vision,
        text_limit=svc.settings.files.inline_text_chars,
    )
    return [*messages[:last], message, *messages[last + 1 :]], kwargs
