"""toolrelay stands on its dependencies' public APIs (issue #25, STYLE habit 11).

Every module under src/toolrelay is walked (`tests/private_access.py` says what
counts as reaching into a dependency's private parts); a finding names the file
and line. The checker itself is tested on small sources, each case one way of
reaching in (or one public use that must not be reported).
"""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent
from typing import Final

import pytest

from tests.private_access import check_source, check_tree, is_private, own_private_names

ROOT: Final = Path(__file__).resolve().parents[1]
SOURCE: Final = ROOT / "src" / "toolrelay"


@pytest.fixture(scope="module")
def findings() -> list[str]:
    return [str(f) for f in check_tree(SOURCE, ROOT)]


def test_no_module_reaches_into_a_dependency(findings: list[str]) -> None:
    assert findings == [], "private parts of dependencies used:\n" + "\n".join(findings)


def found(source: str) -> list[str]:
    return [f.message for f in check_source(dedent(source))]


@pytest.mark.parametrize(
    "source",
    [
        "import httpx._content\n",
        "import httpcore._async.http11 as h\n",
        "from httpx._transports.default import AsyncResponseStream\n",
        "from typer import _click\n",
        "from h11 import _readers as readers\n",
        "import importlib\nimportlib.import_module('h11._readers')\n",
        "from importlib import import_module\nimport_module('anyio._backends._asyncio')\n",
        "__import__('starlette._utils')\n",
        "def f():\n    from uvicorn._types import ASGIApplication\n",
    ],
)
def test_private_imports_are_found(source: str) -> None:
    assert len(found(source)) == 1, source


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations\n",
        "from . import _helpers\nfrom .x import _y\n",
        "from toolrelay.server import _guard\nimport toolrelay._x\n",
        "import httpx\nfrom starlette.requests import Request\n",
        "from typing import TYPE_CHECKING\nfrom toolrelay import __version__\n",
    ],
)
def test_public_and_own_imports_pass(source: str) -> None:
    assert found(source) == []


@pytest.mark.parametrize(
    "source",
    [
        # a module bound by import, and what hangs off it
        "import httpx\nhttpx._content.AsyncIteratorByteStream\n",
        "import asyncio\nasyncio.tasks._PyTask\n",
        # annotated: parameters, strings, unions, Optional, Annotated
        "from starlette.requests import Request\ndef f(request: Request):\n    request._json = 1\n",
        "import asyncio\ndef f(task: 'asyncio.Task[None]'):\n    return task._fut_waiter\n",
        "import h11\ndef f(c: h11.Connection | None):\n    return c._receive_buffer\n",
        "from typing import Optional\nimport h11\ndef f(c: Optional[h11.Connection]):\n    c._x\n",
        "from typing import Annotated\nimport h11\ndef f(c: Annotated[h11.Connection, 1]):\n    c._x\n",
        "import h11\nc: h11.Connection = make()\nc._receive_buffer\n",
        # made by a call of a dependency's class, caught, entered
        "import httpx\nclient = httpx.AsyncClient()\nclient._transport_for_url(1)\n",
        "import httpx\ntry:\n    pass\nexcept httpx.HTTPError as exc:\n    exc._request\n",
        "import httpx\nasync def f():\n    async with httpx.AsyncClient() as c:\n        c._mounts\n",
        # reached for by name
        "getattr(task, '_fut_waiter', None)\n",
        "setattr(request, '_json', {})\n",
        "hasattr(x, '_anything')\n",
        "vars(stream)['_closed']\n",
        "stream.__dict__['_closed'] = True\n",
        # names of dependencies' privates this tree used, on anything untyped
        "def f(s):\n    s._is_stream_consumed = True\n",
        # a private name toolrelay defines nowhere is someone else's
        "def f(s):\n    return s._nobody_defines_this\n",
    ],
)
def test_private_attributes_of_dependencies_are_found(source: str) -> None:
    assert len(found(source)) >= 1, source


def test_an_attribute_typed_as_a_dependency_is_followed() -> None:
    """`self.client` declared or assigned as httpx's: its `_mounts` is httpx's, although
    toolrelay has a `_mounts` of its own elsewhere (which an untyped object may be)."""
    source = """
        import httpx

        class Own:
            def __init__(self):
                self._mounts = {}

        class Declared:
            client: httpx.AsyncClient

            def f(self):
                return self.client._mounts

        class Assigned:
            def __init__(self):
                self.client = httpx.AsyncClient()

            def f(self):
                return self.client._mounts

        def untyped(thing):
            return thing._mounts
    """
    found_lines = [f.line for f in check_source(dedent(source))]
    assert found_lines == [12, 19]


def test_subclasses_of_dependencies() -> None:
    source = """
        import logging
        import httpcore
        import uvicorn

        class Pool(httpcore.AsyncConnectionPool):
            def _assign_requests_to_connections(self):
                return self._requests

            def _ours(self):
                self._mine = 1
                return self._mine

        class Worker(uvicorn.Server):
            def __init__(self, config):
                super().__init__(config)
                self._control = 1

            async def startup(self, sockets=None):
                await super().startup(sockets=sockets)
                super()._log_started_message(sockets)

        class Field(logging.Filter):
            def filter(self, record):
                self._seen = record
                return True
    """
    messages = sorted(f"{f.line}: {f.message}" for f in check_source(dedent(source)))
    assert messages == [
        "14: Worker.startup overrides uvicorn.Server.startup: "
        "uvicorn.Server is run through its public API, not subclassed",
        "21: `super()._log_started_message`: private attribute of the base class uvicorn.Server",
        "6: Pool._assign_requests_to_connections overrides "
        "httpcore.AsyncConnectionPool._assign_requests_to_connections: private",
        "8: `self._requests`: private attribute of the base class httpcore.AsyncConnectionPool",
    ]


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos._exit(1)\n",
        "import sys\nsys._getframe(0)\n",
        "def f(point):\n    return point._replace(x=1)._asdict()\n",
        "def f(color):\n    return color._value_\n",
        "def f(obj):\n    return obj.__class__, obj.__dict__\n",
        "class Own:\n    def f(self):\n        self._x = 1\n        return getattr(self, '_x')\n",
        "class Own:\n    _cache = {}\n\ndef f(other):\n    return other._cache\n",
        "from toolrelay.cli.render import Renderer\nRenderer._on_added\n",
        "from . import sibling\nsibling._helper()\n",
        "def _helper():\n    pass\n\ndef f(module):\n    module._helper()\n",
    ],
)
def test_public_and_own_attributes_pass(source: str) -> None:
    assert found(source) == [], source


def test_private_names() -> None:
    assert is_private("_x") and is_private("__mangled")
    assert not any(map(is_private, ["x", "_", "__init__", "_value_", "_replace"]))
    defined = own_private_names(
        [
            "_a = 1\nclass C:\n    __slots__ = ('_b',)\n    _c = 2\n    def _d(self):\n"
            "        self._e = 1\n        other._f = 2\n"
        ]
    )
    assert defined == {"_a", "_b", "_c", "_d", "_e"}
