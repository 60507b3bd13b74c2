"""A child process on a real pseudo-terminal: type into it, wait for what it prints.

The terminal is the child's controlling terminal, so Ctrl-C (`\\x03`) typed
here reaches it as SIGINT through the terminal driver, exactly as at a shell.
Waits end on output, never on a clock; `HANG` only stops a broken test.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence

from tests.patience import HANG

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]|\r")


def plain(text: str) -> str:
    """Terminal output without colour, cursor movement or carriage returns."""
    return _ESCAPES.sub("", text)


class Terminal:
    """`argv` on a 40×120 pseudo-terminal (stdin, stderr and, unless redirected, stdout)."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], *, stdout: int | None = None
    ) -> None:
        """`stdout=subprocess.PIPE` leaves stdout off the terminal (read `proc.stdout`)."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self._master = master
        self.proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave if stdout is None else stdout,
            stderr=slave,
            env=dict(env),
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self._raw = b""
        self._seen = 0
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            with self._changed:
                self._raw += chunk
                self._changed.notify_all()
            if not chunk:
                return

    @property
    def output(self) -> str:
        """Everything printed so far, escapes removed."""
        with self._changed:
            return plain(self._raw.decode("utf-8", "replace"))

    @property
    def raw(self) -> str:
        """Everything printed so far, escapes kept (to play back as a terminal would)."""
        with self._changed:
            return self._raw.decode("utf-8", "replace")

    def expect(self, text: str) -> str:
        """Wait until `text` is printed after the last match; the output up to its end."""
        with self._changed:
            found = self._changed.wait_for(lambda: text in self._unread(), timeout=HANG)
            unread = self._unread()
            if not found:
                raise AssertionError(f"{text!r} never came; the terminal shows:\n{unread}")
            end = unread.index(text) + len(text)
            self._seen += end
            return unread[:end]

    def _unread(self) -> str:
        return plain(self._raw.decode("utf-8", "replace"))[self._seen :]

    def type(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    def wait(self) -> int:
        """The exit code, once the child ended and its last output was read."""
        code = self.proc.wait(timeout=HANG)
        self._reader.join(timeout=HANG)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._reader.join(timeout=HANG)
        os.close(self._master)
