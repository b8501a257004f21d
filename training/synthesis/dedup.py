"""Decontamination against a reference set and near-duplicate removal.

Similarity of two task modules = ``difflib.SequenceMatcher`` ratio
(2 * matched / total) over their canonical statement lists
(:func:`~cuda_agent.training.synthesis.ast_normalize.statement_tokens`):
1.0 for renamed, reordered-argument or constant-changed copies; lower as
statements differ, e.g. the same operators in another order. A task is
contaminated when its similarity to any reference program is >= the
threshold (paper: 0.9), and a near-duplicate when it reaches the threshold
against a generated task with a smaller id (the smaller id is kept, so the
result does not depend on processing order).

Candidate pairs come from MinHash LSH (``datasketch``) over statement
shingles (single statements and consecutive pairs), so the exact ratio is
computed only for pairs likely to be similar instead of for all pairs
(without datasketch installed, all pairs are compared: exact, slower).
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.training.synthesis.ast_normalize import statement_tokens


class DedupSettings(BaseModel):
    """Thresholds of decontamination and near-duplicate removal."""

    model_config = ConfigDict(extra="forbid")

    reference: Path | None = Field(None, description="KernelBench checkout (or any folder of task .py files) to decontaminate against; None skips it.")
    threshold: float = Field(0.9, ge=0, le=1, description="Similarity at or above which a task is dropped (paper: 0.9).")
    lsh_threshold: float = Field(0.3, gt=0, le=1, description="Jaccard threshold of MinHash LSH candidate pairs (low: few misses, more exact checks).")
    num_perm: int = Field(128, ge=16, description="MinHash permutations.")


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Similarity of two canonical statement lists in [0, 1] (see module doc)."""
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, list(a), list(b), autojunk=False).ratio()


def ast_similarity(code_a: str, code_b: str) -> float:
    """Similarity of two task modules' sources."""
    return similarity(statement_tokens(code_a), statement_tokens(code_b))


def _shingles(tokens: Sequence[str]) -> set[bytes]:
    items = list(tokens) + [a + "\n" + b for a, b in zip(tokens, tokens[1:])]
    return {hashlib.sha1(t.encode()).digest() for t in items}


class _AllPairs:
    """Stand-in for MinHashLSH when datasketch is missing: every stored key is a candidate (exact, slower)."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def insert(self, key: str, _minhash: object) -> None:
        self.keys.append(key)

    def query(self, _minhash: object) -> list[str]:
        return list(self.keys)


def _lsh(settings: DedupSettings):  # type: ignore[no-untyped-def]
    """MinHash LSH index, or all-pairs comparison where datasketch is not installed (extra 'data')."""
    try:
        from datasketch import MinHashLSH
    except ImportError:
        return _AllPairs()
    return MinHashLSH(threshold=settings.lsh_threshold, num_perm=settings.num_perm)


def _minhash(tokens: Sequence[str], num_perm: int):  # type: ignore[no-untyped-def]
    try:
        from datasketch import MinHash
    except ImportError:
        return None

    m = MinHash(num_perm=num_perm, seed=1)
    for s in _shingles(tokens):
        m.update(s)
    return m


@dataclass
class Match:
    """Why a task was dropped: its most similar counterpart."""

    other: str
    score: float


class ReferenceIndex:
    """Reference programs (e.g. KernelBench) indexed for contamination lookups."""

    def __init__(self, programs: dict[str, str], settings: DedupSettings) -> None:
        self.settings = settings
        self.tokens: dict[str, list[str]] = {}
        self.lsh = _lsh(settings)
        for key in sorted(programs):
            try:
                toks = statement_tokens(programs[key])
            except SyntaxError:
                continue
            self.tokens[key] = toks
            self.lsh.insert(key, _minhash(toks, settings.num_perm))

    @classmethod
    def from_folder(cls, root: Path, settings: DedupSettings) -> ReferenceIndex:
        """Every ``*.py`` file under ``root`` (a KernelBench checkout: its ``KernelBench/level*/`` files)."""
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"decontamination reference {root} is not a folder (dedup.reference in the data config)")
        files = sorted(root.rglob("*.py"))
        level_files = [p for p in files if any(part.lower().startswith("level") for part in p.relative_to(root).parts[:-1])]
        programs = {str(p.relative_to(root)): p.read_text(errors="replace") for p in (level_files or files)}
        return cls(programs, settings)

    def __len__(self) -> int:
        return len(self.tokens)

    def best_match(self, code: str) -> Match | None:
        """The reference program most similar to ``code`` when at or above the threshold."""
        toks = statement_tokens(code)
        best: Match | None = None
        for key in sorted(self.lsh.query(_minhash(toks, self.settings.num_perm))):
            score = similarity(toks, self.tokens[key])
            if score >= self.settings.threshold and (best is None or score > best.score):
                best = Match(key, score)
        return best


def near_duplicates(tasks: Iterable[tuple[str, str]], settings: DedupSettings) -> dict[str, Match]:
    """Task id -> the kept task it duplicates, for every near-duplicate among ``(id, code)`` pairs.

    Tasks are visited in id order; a task is dropped when it reaches the
    threshold against an already-kept one.
    """
    lsh = _lsh(settings)
    kept: dict[str, list[str]] = {}
    dropped: dict[str, Match] = {}
    for task_id, code in sorted(tasks):
        toks = statement_tokens(code)
        mh = _minhash(toks, settings.num_perm)
        best: Match | None = None
        for other in sorted(lsh.query(mh)):
            score = similarity(toks, kept[other])
            if score >= settings.threshold and (best is None or score > best.score):
                best = Match(other, score)
        if best is not None:
            dropped[task_id] = best
            continue
        kept[task_id] = toks
        lsh.insert(task_id, mh)
    return dropped
