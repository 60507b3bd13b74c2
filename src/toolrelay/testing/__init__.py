"""Test doubles users can import too: a scripted model, a replay model, a real-socket fake
model server, a transport with no network, wire-format builders, a recording sink, and
`--record DIR` recordings read back (`read_recording`, `recorded_replies`)."""

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
from toolrelay.testing.recorded import Exchange, read_recording, recorded_replies
from toolrelay.testing.scripted_model import Body, Refuse, ReplayModel, ScriptedModel, reply
from toolrelay.testing.sinks import ListSink
from toolrelay.testing.transport import MockResponse, MockTransport
from toolrelay.testing.wire import ToolCallSpec

__all__ = [
    "Body",
    "BodyReply",
    "Exchange",
    "FakeModelServer",
    "JSONReply",
    "ListSink",
    "MockResponse",
    "MockTransport",
    "NDJSONReply",
    "RawReply",
    "RecordedRequest",
    "Refuse",
    "ReplayModel",
    "Reply",
    "SSEReply",
    "ScriptedModel",
    "ToolCallSpec",
    "read_recording",
    "recorded_replies",
    "reply",
]
