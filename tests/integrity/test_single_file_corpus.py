"""KernelBench single files (``load_inline``): the honest corpus passes the static layer, each cheat names its rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness.single_file_integrity import check_single_file

from .conftest import CHEATS, HONEST, corpus, expected_rule

HONEST_FILES = corpus(HONEST / "single_file", ".py")
CHEAT_FILES = corpus(CHEATS / "single_file", ".py")


@pytest.mark.parametrize("path", HONEST_FILES, ids=[p.name for p in HONEST_FILES])
def test_honest_single_file_is_accepted(path: Path) -> None:
    check = check_single_file(path.read_text(), path.name)
    assert check.violations == [], "\n".join(str(v) for v in check.violations)
    assert check.sources and not check.notes  # every source read by the C++ rules


@pytest.mark.parametrize("path", CHEAT_FILES, ids=[p.name for p in CHEAT_FILES])
def test_single_file_cheat_is_rejected(path: Path) -> None:
    rules = [v.rule for v in check_single_file(path.read_text(), path.name).violations]
    assert expected_rule(path) in rules, f"{path.name}: expected {expected_rule(path)}, got {rules}"
