"""The web page's sign-in: API key → signed session cookie; CSRF on cookie writes; CSP."""

from __future__ import annotations

import httpx2

from tests.server.conftest import ADMIN_KEY, Running
from toolrelay.server.session import COOKIE, csrf_token, issue, verify


def _signed_in(running: Running) -> tuple[httpx2.Client, str]:
    client = httpx2.Client(base_url=running.base_url, timeout=10)
    answer = client.post("/api/session", json={"key": ADMIN_KEY})
    assert answer.status_code == 200, answer.text
    return client, str(answer.json()["csrf"])


def test_sign_in_sets_an_httponly_strict_cookie_without_the_key(running: Running) -> None:
    with httpx2.Client(base_url=running.base_url) as client:
        answer = client.post("/api/session", json={"key": ADMIN_KEY})
        header = answer.headers["set-cookie"]
        assert "httponly" in header.lower() and "samesite=strict" in header.lower()
        assert "secure" not in header.lower()  # plain http here; https gets Secure
        assert ADMIN_KEY not in header
        assert answer.json()["user"]["name"] == "admin"
        assert client.get("/api/session").json()["csrf"] == answer.json()["csrf"]
        assert client.get("/api/chats").status_code == 200  # the cookie authenticates


def test_a_wrong_key_gets_no_cookie(running: Running) -> None:
    with httpx2.Client(base_url=running.base_url) as client:
        answer = client.post("/api/session", json={"key": "tr-not-a-key"})
        assert answer.status_code == 401 and "set-cookie" not in answer.headers
        assert client.get("/api/session").status_code == 401


def test_cookie_writes_need_the_csrf_token(running: Running) -> None:
    client, csrf = _signed_in(running)
    try:
        assert client.post("/api/chats", json={}).status_code == 403
        assert client.post("/api/chats", json={}, headers={"X-CSRF-Token": "x"}).status_code == 403
        assert client.post("/api/chats", json={}, headers={"X-CSRF-Token": csrf}).status_code == 201
        # a bearer key needs no CSRF token (no cookie involved)
        with running.client() as keyed:
            assert keyed.post("/api/chats", json={}).status_code == 201
    finally:
        client.close()


def test_revoking_the_key_ends_its_sessions_and_sign_out_forgets_the_cookie(
    running: Running,
) -> None:
    with running.client() as admin:
        made = admin.post("/api/admin/keys", json={"user": "ann"}).json()
    with httpx2.Client(base_url=running.base_url) as client:
        assert client.post("/api/session", json={"key": made["key"]}).status_code == 200
        assert client.get("/api/session").json()["user"]["name"] == "ann"
        with running.client() as admin:
            assert admin.delete(f"/api/admin/keys/{made['id']}").status_code == 204
        gone = client.get("/api/chats")
        assert gone.status_code == 401 and gone.json()["error"]["code"] == "session_revoked"
    client, _ = _signed_in(running)
    try:
        assert client.delete("/api/session").status_code == 204
        assert COOKIE not in client.cookies
        assert client.get("/api/session").status_code == 401
    finally:
        client.close()


def test_session_tokens_are_signed_and_expire() -> None:
    secret = b"s" * 32
    token = issue(secret, "key_1", "usr_1", now=1000)
    assert verify(secret, token, now=1001) is not None
    assert verify(b"t" * 32, token, now=1001) is None
    assert verify(secret, token.replace("usr_1", "usr_2"), now=1001) is None
    assert verify(secret, token, now=1000 + 8 * 24 * 3600) is None
    assert csrf_token(secret, token) != csrf_token(secret, issue(secret, "key_2", "usr_1"))


def test_the_page_is_served_with_a_strict_csp(running: Running) -> None:
    page = httpx2.get(running.base_url + "/")
    assert page.status_code == 200 and '<script type="module" src="/static/app.js">' in page.text
    csp = page.headers["content-security-policy"]
    assert (
        "script-src 'self'" in csp
        and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    )
    assert "frame-ancestors 'none'" in csp
    script = httpx2.get(running.base_url + "/static/app.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith(
        "text/javascript"
    )
    for bad in ("/static/..%2Fsession.py", "/static/__init__.py", "/static/nope.js"):
        assert httpx2.get(running.base_url + bad).status_code == 404


def test_the_vendored_libraries_match_their_pins() -> None:
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "vendor_web.py"
    check = runpy.run_path(str(script))["check"]
    assert check() == []
