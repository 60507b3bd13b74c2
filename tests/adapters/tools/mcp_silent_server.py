"""An MCP server over stdio that never answers: `python mcp_silent_server.py initialize`
answers nothing at all; `... tools/list` answers `initialize` and then nothing more.

Issue 24 item 4: one such server hung every turn, `GET /api/tools` and shutdown.
It reads its input to the end, so it only stops when its stdin closes or it is killed.
"""

from __future__ import annotations

import json
import sys


def main(silent_from: str) -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message.get("method") == "initialize" and silent_from == "tools/list":
            answer = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "silent", "version": "1"},
                },
            }
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
