"""toolrelay: an agent-loop engine for chat systems."""

from toolrelay.core.events import Event

__all__ = ["Event"]
__version__ = "0.1.0"
