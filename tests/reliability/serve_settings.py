"""Run the server under uvicorn from a JSON file of Settings (tests start it as a child process).

Usage: python tests/reliability/serve_settings.py SETTINGS.json PORT
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import uvicorn

from toolrelay.config.settings import Settings
from toolrelay.server.app import create_app

if __name__ == "__main__":
    options = orjson.loads(Path(sys.argv[1]).read_bytes())
    app = create_app(Settings(**options))
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
