"""The page's CSP loads images from this origin and the configured hosts only."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from pydantic import ValidationError

from tests.security.conftest import serve
from toolrelay.config.access import WebConfig
from toolrelay.testing.fake_server import FakeModelServer


def _img_src(base_url: str) -> str:
    csp = httpx2.get(base_url + "/", timeout=10).headers["content-security-policy"]
    (directive,) = [d.strip() for d in csp.split(";") if d.strip().startswith("img-src")]
    return directive


def test_images_from_other_hosts_are_off_by_default(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    with serve(tmp_path, upstream) as base_url:
        assert _img_src(base_url) == "img-src 'self' data: blob:"
        assert httpx2.get(base_url + "/api/info", timeout=10).json()["image_hosts"] == []


def test_the_allowed_hosts_are_in_the_csp_and_told_to_the_page(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    hosts = ["https://images.example.com", "https://*.cdn.example.org:8443"]
    with serve(tmp_path, upstream, web={"image_hosts": hosts}) as base_url:
        assert _img_src(base_url) == "img-src 'self' data: blob: " + " ".join(hosts)
        assert httpx2.get(base_url + "/api/info", timeout=10).json()["image_hosts"] == hosts


def test_an_image_host_must_be_an_https_origin() -> None:
    for bad in ["http://x.example", "https://x.example/path", "https://x; script-src *", "*"]:
        with pytest.raises(ValidationError, match="not an https origin"):
            WebConfig(image_hosts=[bad])
