"""toolrelay: an agent-loop engine for chat systems.

Point it at any model that speaks an OpenAI-style API, give it tools, and get
a loop that streams the model's output into structured items, runs the tool
calls, feeds the results back and repeats until the model answers.

Names are imported lazily, so `import toolrelay.core` stays free of httpx
and asyncio (the core is sans-IO).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolrelay.adapters.models import Ollama, OpenAIChat, OpenAIResponses
    from toolrelay.adapters.tools import PythonTool, tool
    from toolrelay.core.events import Event
    from toolrelay.engine.conversation import Conversation
    from toolrelay.engine.finish import RunResult
    from toolrelay.engine.interfaces import (
        ModelClient,
        ModelRequest,
        ModelStream,
        Tool,
        ToolContext,
        ToolSpec,
    )
    from toolrelay.engine.limits import RunLimits
    from toolrelay.engine.relay import Relay
    from toolrelay.errors import ConfigError, ProviderError, ToolError, ToolrelayError

_WHERE = {
    "ConfigError": "toolrelay.errors",
    "Conversation": "toolrelay.engine.conversation",
    "Event": "toolrelay.core.events",
    "ModelClient": "toolrelay.engine.interfaces",
    "ModelRequest": "toolrelay.engine.interfaces",
    "ModelStream": "toolrelay.engine.interfaces",
    "Ollama": "toolrelay.adapters.models",
    "OpenAIChat": "toolrelay.adapters.models",
    "OpenAIResponses": "toolrelay.adapters.models",
    "ProviderError": "toolrelay.errors",
    "PythonTool": "toolrelay.adapters.tools",
    "Relay": "toolrelay.engine.relay",
    "RunLimits": "toolrelay.engine.limits",
    "RunResult": "toolrelay.engine.finish",
    "Tool": "toolrelay.engine.interfaces",
    "ToolContext": "toolrelay.engine.interfaces",
    "ToolError": "toolrelay.errors",
    "ToolSpec": "toolrelay.engine.interfaces",
    "ToolrelayError": "toolrelay.errors",
    "tool": "toolrelay.adapters.tools",
}

__all__ = [
    "ConfigError",
    "Conversation",
    "Event",
    "ModelClient",
    "ModelRequest",
    "ModelStream",
    "Ollama",
    "OpenAIChat",
    "OpenAIResponses",
    "ProviderError",
    "PythonTool",
    "Relay",
    "RunLimits",
    "RunResult",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolSpec",
    "ToolrelayError",
    "tool",
]
__version__ = "0.1.0"
"""The one place the version is written (pyproject reads it: `[tool.hatch.version]`)."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'toolrelay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
