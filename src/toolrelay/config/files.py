"""`[files]`: what `POST /api/files` accepts, and `[budgets]` lives beside it in settings."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["FilesConfig"]

DEFAULT_TYPES = [
    "text/*",
    "application/json",
    "application/pdf",
    "application/xml",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
]


class FilesConfig(BaseModel):
    """Uploads: one file's size, a user's total, the accepted content types."""

    max_bytes: int = Field(default=5 * 1024 * 1024, ge=1)
    """The largest file (the request body limit, `max_body_bytes`, applies too)."""
    max_user_bytes: int = Field(default=100 * 1024 * 1024, ge=1)
    """What one user's files may take in all; an upload past it is refused (413)."""
    types: list[str] = Field(default_factory=lambda: list(DEFAULT_TYPES))
    """Accepted content types; `type/*` accepts a whole family."""
    inline_text_chars: int = Field(default=100_000, ge=0)
    """A text file attached to a message is a source with at most this much of its text."""

    def accepts(self, mime: str) -> bool:
        family = mime.split("/", 1)[0] + "/*"
        return mime in self.types or family in self.types
