"""No module in core/, harness/, plugins/ or training/ is over 450 lines (STYLE.md: a module's name says all it holds).

The aim is about 400 lines; 450 is the hard limit. A module that grows past it is split by what it holds
(see ``harness/integrity/python_*.py`` for a checker split into mixins), not trimmed by packing lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("core", "harness", "plugins", "training")
LIMIT = 450


def line_count(path: Path) -> int:
    """Physical lines of ``path`` as ``wc -l`` counts them, plus a last line without a newline."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def oversized_modules(root: Path, folders: tuple[str, ...] = FOLDERS, limit: int = LIMIT) -> tuple[int, list[str]]:
    """Scan every ``.py`` file under ``root/<folder>`` for each folder that exists.

    :returns: the number of modules scanned, and one ``"<folder>/<path>.py: <n> lines"`` entry per module over
        ``limit`` lines, sorted by path.
    """
    scanned = 0
    offenders: list[str] = []
    for folder in folders:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            scanned += 1
            n = line_count(path)
            if n > limit:
                offenders.append(f"{path.relative_to(root).as_posix()}: {n} lines")
    return scanned, offenders


def check_module_sizes(root: Path, folders: tuple[str, ...] = FOLDERS, limit: int = LIMIT) -> int:
    """Fail (AssertionError) naming every module over ``limit`` lines; returns the number of modules scanned."""
    scanned, offenders = oversized_modules(root, folders, limit)
    assert not offenders, (
        f"{len(offenders)} module(s) over {limit} lines; split each by what it holds (aim for ~400):\n  "
        + "\n  ".join(offenders))
    return scanned


def test_no_module_over_450_lines() -> None:
    for folder in FOLDERS:
        assert (ROOT / folder).is_dir(), f"{folder}/ is missing under {ROOT}: the size check would pass vacuously"
    scanned = check_module_sizes(ROOT)
    assert scanned > 100, f"only {scanned} modules found under {', '.join(FOLDERS)}: the scan missed the tree"


def test_the_check_names_a_planted_451_line_module(tmp_path: Path) -> None:
    (tmp_path / "harness" / "deep").mkdir(parents=True)
    (tmp_path / "core").mkdir()
    (tmp_path / "harness" / "deep" / "big.py").write_text("x = 1\n" * 451)
    (tmp_path / "core" / "at_limit.py").write_text("x = 1\n" * 449 + "x = 1")  # 450 lines, no final newline
    (tmp_path / "core" / "notes.txt").write_text("x\n" * 1000)  # not a module
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "outside.py").write_text("x = 1\n" * 1000)  # not a checked folder

    with pytest.raises(AssertionError) as info:
        check_module_sizes(tmp_path)
    message = str(info.value)
    assert "harness/deep/big.py: 451 lines" in message
    assert "at_limit" not in message and "notes" not in message and "outside" not in message
    assert oversized_modules(tmp_path) == (2, ["harness/deep/big.py: 451 lines"])

    (tmp_path / "harness" / "deep" / "big.py").write_text("x = 1\n" * 450)
    assert check_module_sizes(tmp_path) == 2
