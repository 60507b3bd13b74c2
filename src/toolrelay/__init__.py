"""toolrelay: an agent-loop engine for chat systems.

Point it at any model that speaks an OpenAI-style API, give it tools, and get
a loop that streams the model's output into structured items, runs the tool
calls, feeds the results back and repeats until the model answers.

Names are imported lazily, so `import toolrelay.core` stays free of aiohttp
and asyncio (the core is sans-IO).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolrelay.adapters.code import JupyterRunner, SandboxLimits
    from toolrelay.adapters.models import Ollama, OpenAIChat, OpenAIResponses
    from toolrelay.adapters.relay import Relay
    from toolrelay.adapters.tools import PythonTool, ToolFile, tool
    from toolrelay.adapters.tools.mcp import MCPServer
    from toolrelay.adapters.tools.openapi import OpenAPIServer
    from toolrelay.adapters.tools.owui import OpenWebUIFilter, OpenWebUITools
    from toolrelay.core.events import Event
    from toolrelay.engine.conversation import Conversation
    from toolrelay.engine.durable_runs import RunHeld
    from toolrelay.engine.finish import RunResult
    from toolrelay.engine.interfaces import (
        ModelClient,
        ModelRequest,
        ModelStream,
        Tool,
        ToolContext,
        ToolSource,
        ToolSpec,
    )
    from toolrelay.engine.limits import RunLimits
    from toolrelay.engine.options import CodeOptions, ModelOptions, TaskOptions
    from toolrelay.engine.request import TurnRequest
    from toolrelay.engine.tasks import BackgroundTask
    from toolrelay.errors import ConfigError, ProviderError, ToolError, ToolrelayError

_WHERE = {
    "BackgroundTask": "toolrelay.engine.tasks",
    "CodeOptions": "toolrelay.engine.options",
    "ConfigError": "toolrelay.errors",
    "Conversation": "toolrelay.engine.conversation",
    "Event": "toolrelay.core.events",
    "JupyterRunner": "toolrelay.adapters.code",
    "MCPServer": "toolrelay.adapters.tools.mcp",
    "ModelClient": "toolrelay.engine.interfaces",
    "ModelOptions": "toolrelay.engine.options",
    "ModelRequest": "toolrelay.engine.interfaces",
    "ModelStream": "toolrelay.engine.interfaces",
    "Ollama": "toolrelay.adapters.models",
    "OpenAIChat": "toolrelay.adapters.models",
    "OpenAIResponses": "toolrelay.adapters.models",
    "OpenAPIServer": "toolrelay.adapters.tools.openapi",
    "OpenWebUIFilter": "toolrelay.adapters.tools.owui",
    "OpenWebUITools": "toolrelay.adapters.tools.owui",
    "ProviderError": "toolrelay.errors",
    "PythonTool": "toolrelay.adapters.tools",
    "Relay": "toolrelay.adapters.relay",
    "RunHeld": "toolrelay.engine.durable_runs",
    "RunLimits": "toolrelay.engine.limits",
    "RunResult": "toolrelay.engine.finish",
    "SandboxLimits": "toolrelay.adapters.code",
    "TaskOptions": "toolrelay.engine.options",
    "Tool": "toolrelay.engine.interfaces",
    "ToolContext": "toolrelay.engine.interfaces",
    "ToolError": "toolrelay.errors",
    "ToolFile": "toolrelay.adapters.tools",
    "ToolSource": "toolrelay.engine.interfaces",
    "ToolSpec": "toolrelay.engine.interfaces",
    "ToolrelayError": "toolrelay.errors",
    "TurnRequest": "toolrelay.engine.request",
    "tool": "toolrelay.adapters.tools",
}

__all__ = [
    "BackgroundTask",
    "CodeOptions",
    "ConfigError",
    "Conversation",
    "Event",
    "JupyterRunner",
    "MCPServer",
    "ModelClient",
    "ModelOptions",
    "ModelRequest",
    "ModelStream",
    "Ollama",
    "OpenAIChat",
    "OpenAIResponses",
    "OpenAPIServer",
    "OpenWebUIFilter",
    "OpenWebUITools",
    "ProviderError",
    "PythonTool",
    "Relay",
    "RunHeld",
    "RunLimits",
    "RunResult",
    "SandboxLimits",
    "TaskOptions",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFile",
    "ToolSource",
    "ToolSpec",
    "ToolrelayError",
    "TurnRequest",
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
