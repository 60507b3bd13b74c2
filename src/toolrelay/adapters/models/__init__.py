"""Model clients: httpx adapters that implement `engine.interfaces.ModelClient`.

Each client (an `http.APIClient`) builds one API's request body and hands
back the raw response body (`body.UpstreamBody`); `core.body.BodyReader`
reads it. Shared plumbing (`http.Upstream`: pooling, retries, error messages;
`HTTPOptions`: headers, timeouts, retries, transport) lives in `http`.
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
