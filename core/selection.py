"""Which workspace state the trusted grading pass scores (``agent.selection``).

- ``final``: the state at the end of the episode.
- ``best``: the fastest correct candidate according to the tool results
  (the paper's best-of-trajectory); correct results with a timing beat
  correct ones without; falls back to ``final`` when nothing passed.
- ``first_passing``: the first correct candidate; falls back to ``final``.

Tool results are only a guide: the selected state is re-verified and re-timed
by ``backend.grade`` with fresh seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuda_agent.errors import ConfigError
from cuda_agent.schemas.result import CandidateResult

SELECTIONS = ("final", "best", "first_passing")


def select_snapshot(selection: str, results: Sequence[CandidateResult], final_snapshot: str) -> str:
    """Snapshot id to grade, from the episode's tool results in order."""
    if selection not in SELECTIONS:
        raise ConfigError(f"agent.selection {selection!r} is not valid; valid: {', '.join(SELECTIONS)}")
    passing = [r for r in results if r.passed and r.snapshot_id]
    if selection == "final" or not passing:
        return final_snapshot
    if selection == "first_passing":
        return passing[0].snapshot_id  # type: ignore[return-value]
    timed = [r for r in passing if r.timing is not None]
    if timed:
        return min(timed, key=lambda r: r.timing.median_ms).snapshot_id  # type: ignore[union-attr,return-value]
    return passing[-1].snapshot_id  # type: ignore[return-value]
