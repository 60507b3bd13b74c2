"""API keys as the stores keep them: generated random, stored only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

__all__ = [
    "KEY_PREFIX",
    "generate_key",
    "hash_key",
    "key_matches",
    "key_tail",
    "public_prefix",
]

KEY_PREFIX: Final = "tr-"
"""Every generated API key starts with this, so leaked keys are easy to spot."""


def generate_key() -> str:
    """A new plaintext key: `tr-` + 40 url-safe characters (240 random bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(30)


def hash_key(key: str) -> str:
    """Keys are stored only as this sha256 hex digest; they are random, so no salt is needed."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_matches(stored_hash: str, key: str) -> bool:
    """Constant-time comparison so response timing says nothing about the stored hash."""
    return hmac.compare_digest(stored_hash.encode("ascii"), hash_key(key).encode("ascii"))


def public_prefix(key: str) -> str:
    """What may be stored and shown of a key: only its fixed, non-secret `tr-` marker.

    No character of the secret is kept (a user's own key, such as the one in
    `TOOLRELAY_ADMIN_KEY`, has no marker and shows nothing); keys are told apart
    by their generated id.
    """
    return KEY_PREFIX if key.startswith(KEY_PREFIX) else ""


TAIL_MIN_LENGTH: Final = 20
"""Keys shorter than this (a weak `TOOLRELAY_ADMIN_KEY`) keep no tail: 4 characters would be
too much of them."""


def key_tail(key: str) -> str:
    """A key's last 4 characters, kept so that `keys list` tells keys apart (`tr-…a1B2`).

    A generated key has 240 random bits; showing 24 of them leaves 216, as services
    that show a key's last characters do. A short key keeps none.
    """
    return key[-4:] if len(key) >= TAIL_MIN_LENGTH else ""
