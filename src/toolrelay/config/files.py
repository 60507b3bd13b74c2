"""`[files]`: what `POST /api/files` accepts, and `[budgets]` lives beside it in settings."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from toolrelay.adapters.s3_files import S3Place

__all__ = ["FilesConfig", "S3Config"]

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


class S3Config(BaseModel):
    """`[files.s3]`: keep uploads in an S3-compatible object store instead of the disk
    (`adapters.s3_files`). The key pair is read from the environment at start-up."""

    endpoint: str = Field(min_length=1)
    """The store's base URL: `https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:9000`."""
    bucket: str = Field(min_length=1)
    """An existing bucket (toolrelay does not create it)."""
    region: str = "us-east-1"
    prefix: str = ""
    """Every key starts with it (`toolrelay/`), so one bucket can hold other things too."""
    access_key_env: str = "AWS_ACCESS_KEY_ID"
    secret_key_env: str = "AWS_SECRET_ACCESS_KEY"
    connect_timeout_s: float = Field(default=10.0, gt=0)

    def place(self) -> S3Place:
        """Where files go, with the key from the environment; ValueError names a missing
        variable (never a value)."""
        missing = [n for n in (self.access_key_env, self.secret_key_env) if not os.environ.get(n)]
        if missing:
            raise ValueError(f"[files.s3] needs the environment variable(s) {', '.join(missing)}")
        return S3Place(
            endpoint=self.endpoint,
            bucket=self.bucket,
            access_key=os.environ[self.access_key_env],
            secret_key=os.environ[self.secret_key_env],
            region=self.region,
            prefix=self.prefix,
        )


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
    s3: S3Config | None = None
    """Set: uploads go to this object store; unset: under `data_dir/files` on the disk."""

    def accepts(self, mime: str) -> bool:
        family = mime.split("/", 1)[0] + "/*"
        return mime in self.types or family in self.types
