"""The parent process's temporary directories, named after its pid so the next parent
can remove them when it was killed before it could (SIGKILL, a power cut).

`make("run")` is `<tmp>/toolrelay-run-<pid>-<random>` (the bus socket);
`make("metrics")` holds the workers' metric files. Making one first removes the
directories of that kind whose process no longer exists, if this user owns them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable

__all__ = ["make", "sweep"]


def make(kind: str, folder: str | None = None) -> str:
    """A fresh directory of `kind` in `folder` (the temporary directory by default)."""
    prefix = f"toolrelay-{kind}-"
    path = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=folder)
    sweep(prefix, [os.path.dirname(path)])
    return path


def sweep(prefix: str, folders: Iterable[str]) -> list[str]:
    """Remove `<prefix><pid>-*` directories of processes that are gone; returns them.
    A name with no pid in it (another version's) is left alone."""
    removed = []
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            pid, dash, _ = name[len(prefix) :].partition("-")
            if not name.startswith(prefix) or not (dash and pid.isdigit()) or _alive(int(pid)):
                continue
            path = os.path.join(folder, name)
            try:
                if os.stat(path).st_uid != os.getuid():
                    continue
            except OSError:
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's
    return True
