"""Wrong keys and failed sign-ins are limited per address and per key prefix: a 429 after."""

from __future__ import annotations

import httpx2

from tests.security.conftest import ADMIN_KEY, Running


def _wrong(client: httpx2.Client, key: str, headers: dict[str, str] | None = None) -> int:
    answer = client.get("/api/chats", headers={"Authorization": f"Bearer {key}", **(headers or {})})
    return answer.status_code


def test_wrong_keys_from_one_address_get_a_429_with_retry_after(running: Running) -> None:
    # uvicorn takes X-Forwarded-For from 127.0.0.1 (a local proxy): one address per test
    here = {"X-Forwarded-For": "203.0.113.7"}
    with httpx2.Client(base_url=running.base_url, timeout=10) as client:
        assert [_wrong(client, f"tr-guess-{n:03}-abcdef", here) for n in range(3)] == [401] * 3
        answer = client.get("/api/chats", headers={"Authorization": "Bearer tr-x", **here})
        assert answer.status_code == 429, answer.text
        assert answer.json()["error"]["code"] == "too_many_failures"
        assert 1 <= int(answer.headers["retry-after"]) <= 600
        # the right key from that address waits too (else a hit would stand out) ...
        blocked = client.get("/api/chats", headers={"Authorization": f"Bearer {ADMIN_KEY}", **here})
        assert blocked.status_code == 429
        # ... sign-in is limited the same way ...
        signin = client.post("/api/session", json={"key": ADMIN_KEY}, headers=here)
        assert signin.status_code == 429 and "retry-after" in signin.headers
        # ... and another address is not affected
        other = {"X-Forwarded-For": "203.0.113.8", "Authorization": f"Bearer {ADMIN_KEY}"}
        assert client.get("/api/chats", headers=other).status_code == 200


def test_one_key_prefix_guessed_from_many_addresses_gets_a_429(running: Running) -> None:
    with httpx2.Client(base_url=running.base_url, timeout=10) as client:
        for n in range(3):
            headers = {"X-Forwarded-For": f"198.51.100.{n}"}
            assert _wrong(client, f"tr-known123-{n:04}", headers) == 401
        fresh = {"X-Forwarded-For": "198.51.100.99"}
        assert _wrong(client, "tr-known123-9999", fresh) == 429
        assert _wrong(client, "tr-other456-9999", fresh) == 401  # another prefix: counted apart


def test_failed_sign_ins_count_and_right_keys_do_not(running: Running) -> None:
    here = {"X-Forwarded-For": "192.0.2.44"}
    with httpx2.Client(base_url=running.base_url, timeout=10) as client:
        for _ in range(5):  # right keys never count
            assert (
                client.post("/api/session", json={"key": ADMIN_KEY}, headers=here).status_code
                == 200
            )
        codes = [
            client.post("/api/session", json={"key": f"tr-wrong{n}-key"}, headers=here).status_code
            for n in range(4)
        ]
        assert codes == [401, 401, 401, 429]
