"""Who may try what: the limit on failed sign-ins (`[auth]`) and the page's image hosts (`[web]`)."""

from __future__ import annotations

import re
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["AuthConfig", "WebConfig"]

_ORIGIN: Final = re.compile(r"https://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:\d{1,5})?")


class AuthConfig(BaseModel):
    """Failed sign-ins and wrong API keys allowed per client address and per key prefix
    (`server.throttle`), then 429 with `Retry-After` for the rest of the window."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_failures: int = Field(default=10, ge=0)
    """Failures allowed in the window; 0 turns the limit off."""
    window_s: float = Field(default=60.0, gt=0)


class WebConfig(BaseModel):
    """The web page. A model-written Markdown image from another host would load at once
    (and could carry the chat out in its URL, if a prompt injection asks for it), so
    images load only from this origin and `image_hosts`; others show as a link."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image_hosts: list[str] = Field(default_factory=list)
    """Origins the page loads Markdown images from: `https://host[:port]`, or
    `https://*.example.com` for its subdomains (put in the page's CSP `img-src`)."""

    @field_validator("image_hosts")
    @classmethod
    def _origins(cls, hosts: list[str]) -> list[str]:
        for host in hosts:
            if not _ORIGIN.fullmatch(host):
                raise ValueError(
                    f"{host!r} is not an https origin: write 'https://images.example.com' "
                    "(a port may follow; no path), or 'https://*.example.com'"
                )
        return [host.lower() for host in hosts]
