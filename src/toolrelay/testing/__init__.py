"""Test doubles users can import too: a real-socket fake model server and wire-format builders."""

from toolrelay.testing.fake_server import (
    BodyReply,
    FakeModelServer,
    JSONReply,
    NDJSONReply,
    RawReply,
    RecordedRequest,
    Reply,
    SSEReply,
)
from toolrelay.testing.wire import ToolCallSpec

__all__ = [
    "BodyReply",
    "FakeModelServer",
    "JSONReply",
    "NDJSONReply",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "SSEReply",
    "ToolCallSpec",
]
