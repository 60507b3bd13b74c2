"""HTTP for the whole process: one small interface (`seam`) and its one implementation (`aio`).

Model clients, OpenAPI tool sources, pipeline outlets and the MCP SDK (through
`bridge`) all send requests through a `Transport`, so one HTTP library, one
TLS context and one proxy configuration serve the process.
"""

from toolrelay.adapters.http.aio import AiohttpTransport, tls_context
from toolrelay.adapters.http.seam import (
    BodyError,
    ConnectError,
    NoResponse,
    Request,
    Response,
    Transport,
    TransportError,
)

__all__ = [
    "AiohttpTransport",
    "BodyError",
    "ConnectError",
    "NoResponse",
    "Request",
    "Response",
    "Transport",
    "TransportError",
    "tls_context",
]
