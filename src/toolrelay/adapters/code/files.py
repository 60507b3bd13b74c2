"""The server's writes and ownership changes in directories that sandboxed code controls.

A chat's directory belongs to its kernel's user while the kernel runs, so
the code can put a symlink (or a hard link) anywhere in it, and swap a
directory for one between two steps of ours. The server runs as root: one
followed symlink would let it write or give away a host file. So here every
step goes through directory file descriptors, never a path below the
trusted top, and never follows a symlink:

1. `own` walks with `os.fwalk(follow_symlinks=False)` (each directory is
   opened relative to its parent and checked to be the one listed) and
   changes owners with `fchownat(AT_SYMLINK_NOFOLLOW)`; a file with more
   than one hard link is left alone (it may be a host file's other name);
2. `save_new` opens each directory with `O_NOFOLLOW | O_DIRECTORY` and
   creates the file with `O_CREAT | O_EXCL | O_NOFOLLOW`, then `fchown`s it.

The top directory itself (a chat's directory, a kernel's socket directory)
sits in a directory only the server writes, so the code cannot replace it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["own", "save_new"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def own(path: Path, uid: int, gid: int) -> None:
    """Give `path` and everything under it to `uid:gid`, following no symlink (module doc)."""
    try:
        top = os.open(path, _DIR)
    except FileNotFoundError:
        return
    try:
        os.chown(top, uid, gid)
        for _, dirs, files, fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            for name in [*dirs, *files]:
                with contextlib.suppress(FileNotFoundError):  # the code may delete as we go
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode) or st.st_nlink == 1:
                        os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(top)


def save_new(folder: Path, sub: str, name: str, data: bytes, owner: tuple[int, int] | None) -> None:
    """Write `data` as the new file `folder/sub/name` (`FileExistsError` if it exists), then
    give it and `sub` to `owner`. `sub` is made if missing; a symlink in its place is
    refused (`OSError`), never followed."""
    top = os.open(folder, _DIR)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(sub, 0o755, dir_fd=top)
        inner = os.open(sub, _DIR, dir_fd=top)
    finally:
        os.close(top)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o644, dir_fd=inner)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            if owner is not None:
                os.fchown(out.fileno(), *owner)
        if owner is not None:
            os.fchown(inner, *owner)
    finally:
        os.close(inner)
