"""The rule table is the single source of truth: ids are well formed, documented, and exercised by the corpus."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import RULES, Violation, describe, threat_class

HERE = Path(__file__).parent
DOC = HERE.parents[1] / "docs" / "integrity.md"
SOURCES = HERE.parents[1] / "harness" / "integrity"


def _corpus_rules(folder: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            first = path.read_text().splitlines()[0]
            if "expect:" in first:
                out.setdefault(first.split("expect:", 1)[1].strip(), []).append(path.name)
    return out


def test_rule_ids_are_well_formed() -> None:
    for rule in RULES:
        assert re.fullmatch(r"T([1-9]|1\d|2[0-3])\.(python|cpp|binary|runtime)\.[a-z_0-9]+", rule), rule
        assert 1 <= threat_class(rule) <= 23
        assert describe(rule)


def test_unknown_rule_is_refused_with_the_valid_ids() -> None:
    with pytest.raises(ValueError, match="unknown integrity rule"):
        Violation(rule="T99.python.nope", message="x")
    with pytest.raises(KeyError, match="valid rules"):
        describe("T1.nope")


def test_every_rule_is_documented() -> None:
    doc = DOC.read_text()
    missing = [rule for rule in RULES if f"`{rule}`" not in doc]
    assert not missing, f"docs/integrity.md lacks: {missing}"


def test_every_rule_named_in_the_code_exists() -> None:
    named = set()
    for path in SOURCES.glob("*.py"):
        named |= set(re.findall(r"\"(T\d+\.(?:python|cpp|binary|runtime)\.\w+)\"", path.read_text()))
    assert named - set(RULES) == set()


def test_corpus_expectations_name_real_rules() -> None:
    for rule, files in _corpus_rules(HERE / "cheats").items():
        assert rule in RULES, f"{files} expect unknown rule {rule}"


def test_every_threat_class_with_a_static_rule_has_two_cheats() -> None:
    # Classes the static layers handle on CPU: at least two corpus variants each.
    counts: dict[int, int] = {}
    for rule, files in _corpus_rules(HERE / "cheats").items():
        counts[threat_class(rule)] = counts.get(threat_class(rule), 0) + len(files)
    static_classes = {threat_class(r) for r in RULES if ".runtime." not in r}
    thin = {c: counts.get(c, 0) for c in static_classes if counts.get(c, 0) < 2}
    assert not thin, f"threat classes with fewer than two cheats in the corpus: {thin}"


def test_honest_corpus_has_at_least_ten_variants() -> None:
    honest = [p for p in (HERE / "honest").rglob("*") if p.is_file()]
    assert len(honest) >= 10
