"""Which candidate of a trajectory gets scored: best-of-trajectory, final, first-passing.

- ``best`` (the paper's): the fastest candidate the agent's own tool calls
  found correct anywhere in the trajectory; speed is the reported speedup over
  torch.compile (then over eager); a correct but never-timed candidate ranks
  below every timed one; ties go to the earliest turn.
- ``final``: the workspace state after the last turn.
- ``first_passing``: the first candidate a tool call found correct.

Every mode also takes ``upto_turn`` so a metric can be drawn as a curve over
the turn budget (the best-of-first-k-turns selection).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cuda_agent.harness.evaluation.records import CandidateEvent, Verdict
from cuda_agent.schemas.trajectory import TurnRecord

SELECTION_MODES: tuple[str, ...] = ("best", "final", "first_passing")

#: Tool phases whose results say something about a candidate's correctness or speed.
EVALUATING_PHASES = ("compile", "verify", "profile")


@dataclass(frozen=True)
class Selected:
    """A selected candidate: where it is and what the trajectory said about it."""

    mode: str
    turn: int
    snapshot_id: str
    verdict: Verdict


def candidate_events(turns: Sequence[TurnRecord]) -> list[CandidateEvent]:
    """Every compile/verify/profile result of the trajectory, in order.

    A result without its own ``snapshot_id`` is attributed to its turn's
    snapshot (or ``turn<N>`` when the turn recorded none).
    """
    events: list[CandidateEvent] = []
    for turn in turns:
        for result in turn.results:
            if result.phase not in EVALUATING_PHASES:
                continue
            snap = result.snapshot_id or turn.snapshot_id or f"turn{turn.turn}"
            verdict = Verdict.of(result)
            assert verdict is not None
            events.append(
                CandidateEvent(
                    turn=turn.turn,
                    snapshot_id=snap,
                    phase=result.phase,
                    verdict=verdict,
                    seeds=list(result.seeds),
                    duration_s=result.duration_s,
                )
            )
    return events


def _speed_key(event: CandidateEvent) -> tuple[int, float, float, int]:
    v = event.verdict
    timed = v.speedup_compile is not None or v.speedup_eager is not None
    return (
        1 if timed else 0,
        v.speedup_compile if v.speedup_compile is not None else 0.0,
        v.speedup_eager if v.speedup_eager is not None else 0.0,
        -event.turn,  # earlier wins a tie
    )


def _latest_for(snapshot_id: str, events: Sequence[CandidateEvent]) -> CandidateEvent | None:
    """The last verify/profile event of a snapshot, else its last compile event."""
    judged = [e for e in events if e.snapshot_id == snapshot_id and e.phase != "compile"]
    if judged:
        return judged[-1]
    compiled = [e for e in events if e.snapshot_id == snapshot_id]
    return compiled[-1] if compiled else None


def select(
    mode: str,
    events: Sequence[CandidateEvent],
    final_snapshots: Sequence[tuple[int, str]] = (),
    upto_turn: int | None = None,
) -> Selected | None:
    """The candidate ``mode`` selects among turns ``<= upto_turn`` (all when None).

    :param events: from :func:`candidate_events`.
    :param final_snapshots: ``(turn, snapshot_id)`` of turns that recorded a
        workspace snapshot (``final`` needs the last one).
    :returns: None when the mode finds nothing (no correct candidate for
        ``best``/``first_passing``; no snapshot for ``final``).
    """
    if mode not in SELECTION_MODES:
        raise ValueError(f"unknown selection mode {mode!r}; valid: {', '.join(SELECTION_MODES)}")
    window = [e for e in events if upto_turn is None or e.turn <= upto_turn]
    correct = [e for e in window if e.verdict.passed and e.phase != "compile"]
    if mode == "best":
        if not correct:
            return None
        best = max(correct, key=_speed_key)
        return Selected(mode, best.turn, best.snapshot_id, best.verdict)
    if mode == "first_passing":
        if not correct:
            return None
        first = correct[0]
        # Its best-known numbers: the fastest correct report of the same state.
        same = [e for e in correct if e.snapshot_id == first.snapshot_id]
        return Selected(mode, first.turn, first.snapshot_id, max(same, key=_speed_key).verdict)
    snaps = [(t, s) for t, s in final_snapshots if upto_turn is None or t <= upto_turn]
    if not snaps:
        if not window:
            return None
        last = window[-1]
        return Selected(mode, last.turn, last.snapshot_id, last.verdict)
    turn, snap = snaps[-1]
    latest = _latest_for(snap, window)
    verdict = latest.verdict if latest is not None else Verdict(status="unevaluated")
    return Selected(mode, turn, snap, verdict)
