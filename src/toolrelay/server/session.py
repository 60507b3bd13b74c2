"""Browser sessions: an API key, posted once, becomes a signed, httpOnly session cookie.

The cookie holds `<session id>.<key id>.<user id>.<expiry>.<signature>`, never
the key: the signature is an HMAC under the server's session secret
(`session_secret`, else a random one kept in `data_dir/session.secret`, so
every worker on that data dir and every restart accept it). A session lives
as long as the key it came from: each request checks that the key is still
active (cached like key lookups), so revoking a key signs its sessions out.
Signing out records the session id in the store (`revoke_session`): a copy of
the cookie is refused from then on (by the other workers once their cached
answer is older than the key cache's `ttl`, 10 s).

Cookie-authenticated writes must also send `X-CSRF-Token`, an HMAC of the
session token the page gets from `POST`/`GET /api/session` (readable only by
a same-origin script); `SameSite=Strict` already keeps other sites' requests
from carrying the cookie, the token is the second lock.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

COOKIE: Final = "toolrelay_session"
CSRF_HEADER: Final = "x-csrf-token"
SESSION_TTL_S: Final = 7 * 24 * 3600
"""A session ends after a week (or when its key is revoked, or at sign-out)."""
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    key_id: str
    user_id: str
    expires: int


def load_secret(configured: str | None, data_dir: Path) -> bytes:
    """The signing secret: the configured one, else the data dir's (made once, mode 0600)."""
    if configured:
        return configured.encode()
    path = data_dir / "session.secret"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    fresh = secrets.token_hex(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(fresh)
    return bytes.fromhex(fresh)


def _sign(secret: bytes, purpose: bytes, payload: str) -> str:
    digest = hmac.new(secret, purpose + b"\x00" + payload.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def issue(secret: bytes, key_id: str, user_id: str, *, now: float | None = None) -> str:
    """A new session's token for this key (ids are `[A-Za-z0-9_-]`, so `.` separates
    safely); each sign-in makes a new random session id."""
    expires = int(now if now is not None else time.time()) + SESSION_TTL_S
    payload = f"{secrets.token_urlsafe(16)}.{key_id}.{user_id}.{expires}"
    return f"{payload}.{_sign(secret, b'session', payload)}"


def verify(secret: bytes, token: str, *, now: float | None = None) -> Session | None:
    """The session a token names, or None when it is forged, malformed or expired (a token
    of the older four-part form, with no session id, is malformed: sign in again)."""
    parts = token.split(".")
    if len(parts) != 5 or len(token) > 512:
        return None
    session_id, key_id, user_id, expires, signature = parts
    expected = _sign(secret, b"session", f"{session_id}.{key_id}.{user_id}.{expires}")
    if not hmac.compare_digest(expected, signature) or not expires.isdigit():
        return None
    if int(expires) <= (now if now is not None else time.time()):
        return None
    return Session(session_id, key_id, user_id, int(expires))


def csrf_token(secret: bytes, token: str) -> str:
    """The CSRF token that goes with a session token."""
    return _sign(secret, b"csrf", token)


def csrf_ok(secret: bytes, token: str, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(csrf_token(secret, token), sent)
