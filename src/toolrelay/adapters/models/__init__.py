"""Model clients: the adapters that implement `engine.interfaces.ModelClient`.

Each client (an `http.APIClient`) builds one API's request body and hands
back the raw response body (`body.UpstreamBody`); `core.stream.reader.BodyReader`
reads it. Shared plumbing (`http.Upstream`: retries, timeouts, error messages;
`HTTPOptions`: headers, timeouts, retries, size cap, transport) lives in
`http`; the bytes go through `adapters.http`'s transport.
"""

from toolrelay.adapters.models.http import HTTPOptions, Retry, Timeouts, UpstreamBody
from toolrelay.adapters.models.ollama import Ollama
from toolrelay.adapters.models.openai_chat import OpenAIChat
from toolrelay.adapters.models.openai_responses import OpenAIResponses

__all__ = [
    "HTTPOptions",
    "Ollama",
    "OpenAIChat",
    "OpenAIResponses",
    "Retry",
    "Timeouts",
    "UpstreamBody",
]
