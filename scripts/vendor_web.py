"""Fetch the page's two JavaScript libraries from the npm registry, check them, vendor them.

    python scripts/vendor_web.py          # fetch, check, write src/toolrelay/web/static/vendor-*
    python scripts/vendor_web.py --check  # only check the vendored files against the pins

Each library is pinned by version and by the registry's `sha512` integrity of
its tarball (what `npm` records in a lockfile); the tarball is refused unless
it matches. The one file the page loads is taken out of it and its sha256 is
pinned too, so `--check` (run by the tests) sees a vendored file that was
edited by hand or fetched from anywhere else. To upgrade: change a version,
set its integrity from `npm view <name>@<version> dist.integrity`, run this,
read the diff, and update the sha256 it prints.
"""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

STATIC = Path(__file__).resolve().parents[1] / "src" / "toolrelay" / "web" / "static"
REGISTRY = "https://registry.npmjs.org"


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    integrity: str
    member: str
    """The file inside the tarball the page loads (an ES module)."""
    target: str
    sha256: str


PINS = (
    Pin(
        "marked",
        "18.2.1",
        "sha512-ii4bxCTCqqwpT86XZWgJNs+ZnAIZksmLGYMViWA7PDIXYIeNo1x6cDdX3JOip9NM/cI6p8z57FxliACboTruMA==",
        "package/lib/marked.esm.js",
        "vendor-marked.js",
        "408c822184aa95bc4a13127703602f58fc8807c5ca9162982174b70264898e92",
    ),
    Pin(
        "dompurify",
        "3.5.0",
        "sha512-LYC0ZkE8P1V42JsRYTwMdme/2ET8SpOc5AA2eOFjP/IadvRd2fwiT4TVz5vkfy0XUx12aS2UaRkTnfVPNOv9vw==",
        "package/dist/purify.es.mjs",
        "vendor-purify.js",
        "2279ba57da0e15784fd8ce3f120a40dbe1b49fe472cb5afab0e50e0ddfdd0777",
    ),
)


def fetch(pin: Pin) -> bytes:
    url = f"{REGISTRY}/{pin.name}/-/{pin.name}-{pin.version}.tgz"
    with urllib.request.urlopen(url, timeout=60) as response:
        tarball: bytes = response.read()
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    if digest != pin.integrity:
        raise SystemExit(f"{pin.name}@{pin.version}: integrity {digest} != pinned {pin.integrity}")
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        member = archive.extractfile(pin.member)
        if member is None:
            raise SystemExit(f"{pin.name}: {pin.member} is not a file in the tarball")
        return member.read()


def banner(pin: Pin) -> bytes:
    return (
        f"/* {pin.name}@{pin.version} from {REGISTRY} ({pin.member}), vendored by "
        f"scripts/vendor_web.py; tarball {pin.integrity} */\n"
    ).encode()


def check() -> list[str]:
    problems = []
    for pin in PINS:
        path = STATIC / pin.target
        if not path.is_file():
            problems.append(f"{pin.target}: missing (run python scripts/vendor_web.py)")
            continue
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != pin.sha256:
            problems.append(f"{pin.target}: sha256 {got} != pinned {pin.sha256}")
    return problems


def main(argv: list[str]) -> int:
    if "--check" not in argv:
        for pin in PINS:
            body = banner(pin) + fetch(pin)
            (STATIC / pin.target).write_bytes(body)
            digest = hashlib.sha256(body).hexdigest()
            sys.stdout.write(f"{pin.target}: {pin.name}@{pin.version} sha256 {digest}\n")
    problems = check()
    for problem in problems:
        sys.stderr.write(problem + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
