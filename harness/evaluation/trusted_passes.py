"""The trusted passes over an episode's candidates: regrading, budget points, hidden re-verification.

Every pass restores a workspace snapshot into a fresh folder and grades it with ``backend.grade`` (fresh seeds,
fresh process), never trusting the agent's own tool results. A snapshot is graded once per episode, whichever
selection mode or budget point picked it; the loop's own graded result is reused for the snapshot it graded.
Results carry the episode's run stamp (config hash, plugins, system prompt hash).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuda_agent.harness.evaluation.config import EvalConfig
from cuda_agent.harness.evaluation.hidden import hidden_check
from cuda_agent.harness.evaluation.records import TRAJECTORY_FILE, BudgetPoint, CandidateEvent, HiddenCheck, Verdict
from cuda_agent.harness.evaluation.selection import candidate_events, select
from cuda_agent.interrupts import EpisodeInterrupted, StopRequest
from cuda_agent.provenance import RunStamp, stamp_from_header
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.schemas.trajectory import EndRecord, load_trajectory


def budget_turns(max_turns: int, configured: Sequence[int] | None = None) -> list[int]:
    """The turn budgets regraded: ``configured`` (cut to ``max_turns``), else 1, 2, 4, ... and ``max_turns``."""
    if configured:
        return sorted({k for k in configured if 1 <= k <= max_turns} | {max_turns})
    points, k = set(), 1
    while k < max_turns:
        points.add(k)
        k *= 2
    return sorted(points | {max_turns})


def snapshot_store(episode_dir: Path) -> Path:
    """Where the episode's workspace snapshots are (the loop's default ``<workspace>/../.snapshots``)."""
    default = episode_dir / ".snapshots"
    if default.is_dir():
        return default
    for manifests in episode_dir.rglob("manifests"):
        if manifests.is_dir():
            return manifests.parent
    return default


def restore(ep_dir: Path, snapshot_id: str, dest_name: str) -> Any:
    """Snapshot ``snapshot_id`` rebuilt into a fresh folder ``ep_dir/dest_name[-n]``."""
    from cuda_agent.harness.workspace import ConfinedWorkspace

    dest = ep_dir / dest_name
    n = 1
    while dest.exists():
        n += 1
        dest = ep_dir / f"{dest_name}-{n}"
    return ConfinedWorkspace.restore(snapshot_id, snapshot_store(ep_dir), dest)


class TrustedPasses:
    """The trusted passes of one episode, grading each distinct snapshot at most once.

    :param stop: checked before every grading; once set, :class:`EpisodeInterrupted` is raised (not done).
    """

    def __init__(self, config: EvalConfig, task: TaskManifest, ep_dir: Path, backend: Any,
                 stop: StopRequest | None = None) -> None:
        self.config, self.task, self.ep_dir, self.backend, self.stop = config, task, ep_dir, backend, stop
        traj = load_trajectory(ep_dir / TRAJECTORY_FILE)
        self.turns = traj.turns
        self.events: list[CandidateEvent] = candidate_events(traj.turns)
        self.finals = [(t.turn, t.snapshot_id) for t in traj.turns if t.snapshot_id]
        self.stamp = stamp_from_header(traj.header) if traj.header is not None else RunStamp()
        self.graded: dict[str, CandidateResult] = {}

    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise EpisodeInterrupted(f"{self.ep_dir.name}: stopped on request during the trusted passes")

    def grade(self, snapshot_id: str, label: str) -> CandidateResult:
        """The trusted grade of ``snapshot_id`` (once per snapshot)."""
        if snapshot_id not in self.graded:
            self._check_stop()
            try:
                result = self.backend.grade(restore(self.ep_dir, snapshot_id, f"regrade-{label}"), self.task)
            except Exception as exc:  # grading must always yield a record
                result = CandidateResult(task_id=self.task.id, phase="grade", status=Status.error,
                                         message=f"regrading failed: {type(exc).__name__}: {exc}")
            self._check_stop()  # a grading whose processes were ended on request is no verdict
            if result.snapshot_id is None:
                result = result.model_copy(update={"snapshot_id": snapshot_id})
            self.graded[snapshot_id] = self.stamp.apply(result)
        return self.graded[snapshot_id]

    def regrade(self, end: EndRecord) -> dict[str, CandidateResult]:
        """Selection mode -> trusted grading of the candidate it selected (``eval.selections``)."""
        if end.graded is not None and end.selected_snapshot_id:
            self.graded.setdefault(end.selected_snapshot_id, self.stamp.apply(end.graded))
        out: dict[str, CandidateResult] = {}
        for mode in self.config.eval.selections:
            chosen = select(mode, self.events, self.finals)
            if chosen is not None:
                out[mode] = self.grade(chosen.snapshot_id, mode)
        return out

    def budget(self) -> list[BudgetPoint]:
        """The best-of-first-k candidate's trusted grade at each budget point k (the budget curves' points)."""
        points = []
        for k in budget_turns(self.config.agent.max_turns, self.config.eval.budget_points):
            chosen = select("best", self.events, self.finals, upto_turn=k)
            if chosen is None:
                points.append(BudgetPoint(turn=k))
                continue
            points.append(BudgetPoint(turn=k, snapshot_id=chosen.snapshot_id,
                                      regraded=Verdict.of(self.grade(chosen.snapshot_id, f"budget{k}"))))
        return points

    def hidden(self, regrades: dict[str, CandidateResult]) -> dict[str, HiddenCheck]:
        """Hidden re-verification of each ``eval.hidden_modes`` candidate the regrading found correct."""
        seeds = {s for e in self.events for s in e.seeds}
        done: dict[str, HiddenCheck] = {}
        out: dict[str, HiddenCheck] = {}
        for mode in self.config.eval.hidden_modes:
            graded = regrades.get(mode)
            if graded is None or not graded.passed or not graded.snapshot_id:
                continue
            snap = graded.snapshot_id
            if snap not in done:
                self._check_stop()
                try:
                    ws = restore(self.ep_dir, snap, f"hidden-{mode}")
                    done[snap] = hidden_check(self.backend, ws, self.task, trajectory_seeds=seeds,
                                              factor=self.config.eval.widen_factor)
                except Exception as exc:
                    done[snap] = HiddenCheck(note=f"hidden checks failed to run: {type(exc).__name__}: {exc}")
            out[mode] = done[snap]
        return out
