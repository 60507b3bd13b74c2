"""One exception tree for everything toolrelay raises on purpose."""

from __future__ import annotations


class ToolrelayError(Exception):
    """Base of every error toolrelay raises deliberately."""


class ProviderError(ToolrelayError):
    """The model server answered with an error (HTTP status or an error inside the stream)."""

    def __init__(self, message: str, *, status: int | None = None, body: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body


class ToolError(ToolrelayError):
    """A tool could not be run; its message goes back to the model as the result."""

    def __init__(self, message: str = "", *, reason: str | None = None) -> None:
        """`reason`: why, without what changes from one attempt to the next (a backoff's
        wait), so one failure is logged once however often it is met (`engine.toolbox`)."""
        super().__init__(message)
        self.reason = reason


class ConfigError(ToolrelayError):
    """Bad configuration: names the key and the problem."""
