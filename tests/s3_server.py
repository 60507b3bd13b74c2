"""A real local S3 server for the tests: moto's (`moto[server]`, the dev group) as a
child process on a free port, with a fresh bucket per use.

moto does not check signatures; `tests/adapters/test_s3_files.py` checks ours against
AWS's published example instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import pytest

from tests.patience import HANG
from toolrelay.adapters.s3_files import EMPTY_SHA256, S3Place, sign
from toolrelay.core.ids import new_id

KEY_ENV = "TOOLRELAY_TEST_S3_KEY"
SECRET_ENV = "TOOLRELAY_TEST_S3_SECRET"


def _moto_server() -> str:
    """moto_server beside this Python (the project's venv), on PATH, or named by
    TOOLRELAY_MOTO_SERVER."""
    named = os.environ.get("TOOLRELAY_MOTO_SERVER")
    beside = Path(sys.executable).parent / "moto_server"
    found = named or (str(beside) if beside.is_file() else shutil.which("moto_server"))
    if not found:
        pytest.fail(
            "moto_server is missing: the S3 file tests need it. Install the dev group "
            "(`pip install --group dev`, which has moto[server]) or set TOOLRELAY_MOTO_SERVER."
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    endpoint: str

    def bucket(self) -> S3Place:
        """A new empty bucket, and the place to keep files in it."""
        name = new_id("b").lower().replace("_", "-")
        place = S3Place(self.endpoint, name, "test-key", "test-secret", prefix="files/")
        url = f"{self.endpoint}/{name}"
        headers = sign(
            "PUT", url, {}, payload_sha256=EMPTY_SHA256, access_key=place.access_key,
            secret_key=place.secret_key, region=place.region, now=datetime.now(UTC),
        )  # fmt: skip
        headers.pop("host")
        made = httpx2.put(url, headers=headers)
        assert made.status_code == 200, made.text
        return place


def running_s3(log: Path) -> Iterator[S3Server]:
    """moto on a free port until the generator is closed."""
    port = _free_port()
    with log.open("wb") as out:
        child = subprocess.Popen(
            [_moto_server(), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            endpoint = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + HANG
            while True:
                try:
                    httpx2.get(endpoint, timeout=1)
                    break
                except httpx2.TransportError as exc:
                    if child.poll() is not None or time.monotonic() > deadline:
                        text = log.read_text()
                        raise AssertionError(f"moto_server did not start: {text}") from exc
                    time.sleep(0.05)
            yield S3Server(endpoint)
        finally:
            child.terminate()
            child.wait(timeout=HANG)


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    yield from running_s3(tmp_path_factory.mktemp("s3") / "moto.log")
