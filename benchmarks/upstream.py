"""A fast fake upstream for the server benchmark, run as its own process.

`python -m benchmarks.upstream PORT CHUNKS INTERVAL` serves every request a
streamed chat completion of CHUNKS text chunks, INTERVAL seconds apart.
"""

from __future__ import annotations

import sys
import time

from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks


def main() -> None:
    port, chunks, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    reply = SSEReply(chat_chunks(text=[f"tok{i} " for i in range(chunks)]), delay=interval)
    server = FakeModelServer(port=port)
    server.set_default(reply)
    server.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:  # the parent kills us; keep the request log from growing meanwhile
        time.sleep(1)
        server.requests.clear()


if __name__ == "__main__":
    main()
