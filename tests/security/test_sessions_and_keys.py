"""Sign-out ends the session on the server; an admin cannot lock the API out by revoking."""

from __future__ import annotations

import httpx2

from tests.security.conftest import ADMIN_KEY, Running
from toolrelay.server.session import COOKIE


def test_a_copied_cookie_is_refused_after_sign_out(running: Running) -> None:
    with httpx2.Client(base_url=running.base_url, timeout=10) as browser:
        assert browser.post("/api/session", json={"key": ADMIN_KEY}).status_code == 200
        stolen = browser.cookies[COOKIE]
        assert browser.delete("/api/session").status_code == 204
    with httpx2.Client(base_url=running.base_url, timeout=10) as thief:
        thief.cookies.set(COOKIE, stolen)
        answer = thief.get("/api/chats")
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "session_revoked"
    with httpx2.Client(base_url=running.base_url, timeout=10) as again:  # a new sign-in works
        assert again.post("/api/session", json={"key": ADMIN_KEY}).status_code == 200
        assert again.get("/api/chats").status_code == 200


def test_the_last_admin_key_is_never_revoked_and_your_own_only_when_confirmed(
    running: Running,
) -> None:
    with running.client() as admin:
        keys = admin.get("/api/admin/keys").json()["data"]
        (own,) = [k for k in keys if k["user_id"] and k["revoked_at"] is None]
        refused = admin.delete(f"/api/admin/keys/{own['id']}?confirm=true")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "last_admin_key"
        second = admin.post("/api/admin/keys", json={"admin": True, "name": "spare"}).json()
        unconfirmed = admin.delete(f"/api/admin/keys/{own['id']}")
        assert unconfirmed.status_code == 409
        assert unconfirmed.json()["error"]["code"] == "own_key"
        assert admin.get("/api/chats").status_code == 200  # still works
        assert admin.delete(f"/api/admin/keys/{own['id']}?confirm=true").status_code == 204
        assert admin.get("/api/chats").status_code == 401
    with running.client(second["key"]) as spare:  # another admin's key: no confirmation
        user_key = spare.post("/api/admin/keys", json={"user": "ann"}).json()
        assert spare.delete(f"/api/admin/keys/{user_key['id']}").status_code == 204


def test_a_session_revoking_its_own_key_must_confirm(running: Running) -> None:
    with running.client() as admin:
        admin.post("/api/admin/keys", json={"admin": True, "name": "spare"})
        own = next(k for k in admin.get("/api/admin/keys").json()["data"] if k["name"] != "spare")
    with httpx2.Client(base_url=running.base_url, timeout=10) as browser:
        csrf = browser.post("/api/session", json={"key": ADMIN_KEY}).json()["csrf"]
        headers = {"X-CSRF-Token": csrf}
        answer = browser.delete(f"/api/admin/keys/{own['id']}", headers=headers)
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "own_key"


def test_keys_are_listed_with_their_last_characters(running: Running) -> None:
    with running.client() as admin:
        made = admin.post("/api/admin/keys", json={"user": "ann"}).json()
        assert made["tail"] == made["key"][-4:]
        listed = {k["id"]: k for k in admin.get("/api/admin/keys").json()["data"]}
        assert listed[made["id"]]["tail"] == made["key"][-4:]
        assert made["key"][4:-4] not in str(listed)
