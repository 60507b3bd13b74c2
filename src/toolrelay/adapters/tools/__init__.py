"""Tool sources: Python functions (`@tool`), tool files and modules.

Each tool implements `toolrelay.engine.interfaces.Tool`; the runner decides
how and when they are called.
"""

from toolrelay.adapters.tools.loader import (
    ToolFile,
    as_tools,
    load_tools_from_file,
    load_tools_from_module,
)
from toolrelay.adapters.tools.python import PythonTool, tool

__all__ = [
    "PythonTool",
    "ToolFile",
    "as_tools",
    "load_tools_from_file",
    "load_tools_from_module",
    "tool",
]
