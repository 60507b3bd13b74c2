"""Model clients: httpx adapters that implement `engine.interfaces.ModelClient`.

Each client builds one API's request body and hands back the raw response
body (`HTTPModelStream`); `core.body.BodyReader` reads it. Shared plumbing
(pooling, timeouts, retries, error messages) lives in `http`.
"""

from toolrelay.adapters.models.http import HTTPModelStream, Retry, Timeouts
from toolrelay.adapters.models.ollama import Ollama
from toolrelay.adapters.models.openai_chat import OpenAIChat
from toolrelay.adapters.models.openai_responses import OpenAIResponses

__all__ = ["HTTPModelStream", "Ollama", "OpenAIChat", "OpenAIResponses", "Retry", "Timeouts"]
