"""What an evaluated episode's files say, as typed records.

An episode folder holds ``trajectory.jsonl`` and ``result.json`` (written by
the agent loop) and ``eval.json`` (an :class:`EvalRecord`, written by the
runner last and atomically: its presence marks the episode done).
:func:`summarize_episode` turns the three into one :class:`EpisodeSummary`,
the only thing metrics and reports read.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.schemas.result import CandidateResult
from cuda_agent.schemas.trajectory import EndRecord, load_trajectory

EVAL_RECORD_FILE = "eval.json"
RESULT_FILE = "result.json"
TRAJECTORY_FILE = "trajectory.jsonl"
EVAL_SCHEMA = "eval/1"


class Verdict(BaseModel):
    """The numbers that matter about one evaluation of a candidate."""

    model_config = ConfigDict(extra="forbid")

    status: str = Field(description="CandidateResult status value ('correct', 'incorrect', ...) or 'unevaluated'.")
    speedup_eager: float | None = Field(None, description="t_eager / t_candidate, when timed.")
    speedup_compile: float | None = Field(None, description="t_compile / t_candidate, when timed.")
    rule: str | None = Field(None, description="Integrity rule id of a rejection.")

    @property
    def passed(self) -> bool:
        """The candidate was found correct."""
        return self.status == "correct"

    @classmethod
    def of(cls, result: CandidateResult | None) -> Verdict | None:
        """The verdict of a CandidateResult (None stays None)."""
        if result is None:
            return None
        return cls(
            status=result.status.value,
            speedup_eager=result.speedup_eager,
            speedup_compile=result.speedup_compile,
            rule=result.rule,
        )


class HiddenCheck(BaseModel):
    """Hidden re-verification of one selected candidate (see :mod:`.hidden`)."""

    model_config = ConfigDict(extra="forbid")

    heldout: CandidateResult | None = Field(None, description="Verify with held-out seeds, task's own input distribution.")
    widened: CandidateResult | None = Field(None, description="Verify with widened inputs within each declared domain.")
    widened_inputs: list[str] = Field(
        default_factory=list, description="How each input was widened, e.g. 'input0: uniform [0,1) -> [-4,4)'."
    )
    seed_overlap: list[int] = Field(
        default_factory=list, description="Held-out seeds that also appeared in the trajectory (should be empty)."
    )
    note: str = Field("", description="Why a check was skipped or is inconclusive.")


class BudgetPoint(BaseModel):
    """The trusted regrade of the best-of-first-k-turns candidate of an episode, at one turn budget k."""

    model_config = ConfigDict(extra="forbid")

    turn: int = Field(description="Turn budget k: candidates of turns 1..k compete.")
    snapshot_id: str | None = Field(None, description="The best-of-first-k candidate; None when none was correct.")
    regraded: Verdict | None = Field(None, description="Its trusted grading verdict; None when there was none.")


class EvalRecord(BaseModel):
    """``eval.json``: what the eval runner added to an episode (its done marker)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(EVAL_SCHEMA, alias="schema", description="Record format id.")
    task_id: str = Field(description="TaskManifest.id.")
    level: int | None = Field(None, description="Task level when known.")
    seed_index: int = Field(description="Seed index k of the episode (0..K-1).")
    seed: int = Field(description="RunConfig.seed the episode ran with.")
    device: int | None = Field(None, description="Index of the device (scheduler slot) the episode used.")
    started_at: float = Field(description="Unix time the runner started the episode.")
    ended_at: float = Field(description="Unix time the episode (with regrading and hidden checks) ended.")
    runner_error: str | None = Field(None, description="Exception text when the episode could not run.")
    regrades: dict[str, CandidateResult] = Field(
        default_factory=dict, description="Selection mode -> trusted grading result of the candidate it selected."
    )
    hidden: dict[str, HiddenCheck] = Field(
        default_factory=dict, description="Selection mode -> hidden re-verification of its regraded candidate."
    )
    budget: list[BudgetPoint] = Field(
        default_factory=list, description="Trusted regrades of the best-of-first-k candidate at each budget point k."
    )
    gpu_busy_s: float | None = Field(None, description="Seconds this episode held its device's timing lock.")
    gpu_wait_s: float | None = Field(None, description="Seconds this episode waited in its device's queue.")
    build_s: float | None = Field(None, description="Seconds this episode spent in compile calls (build pool).")


class CandidateEvent(BaseModel):
    """One tool-call evaluation of a workspace state inside a trajectory."""

    model_config = ConfigDict(extra="forbid")

    turn: int = Field(description="Turn whose tools produced the result.")
    snapshot_id: str = Field(description="Workspace state evaluated (result's, else the turn's snapshot).")
    phase: str = Field(description="'compile', 'verify' or 'profile'.")
    verdict: Verdict = Field(description="Status and speedups the tool reported.")
    seeds: list[int] = Field(default_factory=list, description="Seeds the tool used.")
    duration_s: float | None = Field(None, description="Wall time of the evaluation.")


class SelectionOutcome(BaseModel):
    """The candidate one selection mode picked, before and after trusted regrading."""

    model_config = ConfigDict(extra="forbid")

    mode: str = Field(description="'best', 'final' or 'first_passing'.")
    turn: int | None = Field(None, description="Turn of the selected candidate; None when nothing was selected.")
    snapshot_id: str | None = Field(None, description="Selected workspace snapshot.")
    in_trajectory: Verdict | None = Field(None, description="What the agent's own tool calls said about it.")
    regraded: Verdict | None = Field(None, description="The trusted grading pass's verdict.")
    hidden_heldout_pass: bool | None = Field(None, description="Passed held-out seeds; None = not checked.")
    hidden_widened_pass: bool | None = Field(None, description="Passed widened inputs; None = not checked/inconclusive.")


class EpisodeSummary(BaseModel):
    """Everything metrics need from one episode."""

    model_config = ConfigDict(extra="forbid")

    episode: str = Field(description="Episode folder name.")
    task_id: str = Field(description="Task id.")
    level: int | None = Field(None, description="Task level.")
    seed_index: int = Field(0, description="Seed index k.")
    exit: str = Field("error", description="EndRecord.exit, or 'runner_error'.")
    turns: int = Field(0, description="Turns taken.")
    wall_s: float = Field(0.0, description="Episode wall time (agent loop).")
    tokens: int = Field(0, description="prompt + completion tokens of the episode.")
    completion_tokens: int = Field(0, description="Generated tokens.")
    gpu_s: float = Field(0.0, description="Device seconds: timing-lock time if the runner measured it, else the sum of verify/profile/grade durations.")
    started_at: float | None = Field(None, description="Runner start time (unix).")
    ended_at: float | None = Field(None, description="Runner end time (unix).")
    device: int | None = Field(None, description="Device slot used.")
    reward: float | None = Field(None, description="The loop's reward for its own graded selection.")
    events: list[CandidateEvent] = Field(default_factory=list, description="All candidate evaluations, in order.")
    final_snapshots: list[tuple[int, str]] = Field(
        default_factory=list, description="(turn, snapshot id) of every turn that recorded a snapshot."
    )
    selections: dict[str, SelectionOutcome] = Field(default_factory=dict, description="Mode -> outcome.")
    budget: list[BudgetPoint] = Field(default_factory=list, description="Regraded best-of-first-k points (eval.json).")
    runner_error: str | None = Field(None, description="Why the episode could not run, if so.")
    message: str = Field("", description="EndRecord.message (why a policy error or a harness error ended it).")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` via a temporary file, fsync and rename (a crash leaves the old file or none)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
    text = data if isinstance(data, str) else json.dumps(data, indent=2, sort_keys=True, default=str)
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_eval_record(episode_dir: Path) -> EvalRecord | None:
    """The episode's ``eval.json``, or None while the episode is unfinished."""
    path = episode_dir / EVAL_RECORD_FILE
    if not path.exists():
        return None
    return EvalRecord.model_validate_json(path.read_text())


def read_end_record(episode_dir: Path) -> EndRecord | None:
    """The episode's ``result.json`` as an EndRecord (unknown extra keys ignored), or None."""
    path = episode_dir / RESULT_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    known = {k: v for k, v in data.items() if k in EndRecord.model_fields}
    return EndRecord.model_validate(known)


def summarize_episode(episode_dir: Path) -> EpisodeSummary:
    """Summarise a finished episode folder (trajectory, result, eval record).

    Raises FileNotFoundError naming the folder when ``eval.json`` is absent
    (the episode is not finished).
    """
    from cuda_agent.harness.evaluation.selection import SELECTION_MODES, candidate_events, select

    episode_dir = Path(episode_dir)
    record = read_eval_record(episode_dir)
    if record is None:
        raise FileNotFoundError(f"{episode_dir}: no {EVAL_RECORD_FILE}; the episode is not finished")
    summary = EpisodeSummary(
        episode=episode_dir.name,
        task_id=record.task_id,
        level=record.level,
        seed_index=record.seed_index,
        started_at=record.started_at,
        ended_at=record.ended_at,
        device=record.device,
        runner_error=record.runner_error,
        budget=record.budget,
    )
    if record.runner_error is not None:
        summary.exit = "runner_error"
        return summary
    traj = load_trajectory(episode_dir / TRAJECTORY_FILE)
    end = read_end_record(episode_dir) or traj.end
    events = candidate_events(traj.turns)
    summary.events = events
    summary.final_snapshots = [(t.turn, t.snapshot_id) for t in traj.turns if t.snapshot_id]
    if end is not None:
        summary.exit = end.exit
        summary.message = end.message[:500]
        summary.turns = end.turns
        summary.wall_s = end.wall_s
        summary.reward = end.reward
        summary.completion_tokens = int(end.usage.get("completion_tokens", 0))
        summary.tokens = int(end.usage.get("prompt_tokens", 0)) + summary.completion_tokens
    else:
        summary.turns = len(traj.turns)
    if record.gpu_busy_s is not None:
        summary.gpu_s = record.gpu_busy_s
    else:
        durations = [e.duration_s or 0.0 for e in events if e.phase in ("verify", "profile")]
        durations += [r.duration_s or 0.0 for r in record.regrades.values()]
        summary.gpu_s = float(sum(durations))
    for mode in SELECTION_MODES:
        chosen = select(mode, events, summary.final_snapshots)
        outcome = SelectionOutcome(mode=mode)
        if chosen is not None:
            outcome.turn, outcome.snapshot_id, outcome.in_trajectory = chosen.turn, chosen.snapshot_id, chosen.verdict
        regraded = record.regrades.get(mode)
        outcome.regraded = Verdict.of(regraded)
        hidden = record.hidden.get(mode)
        if hidden is not None:
            outcome.hidden_heldout_pass = None if hidden.heldout is None else hidden.heldout.passed
            outcome.hidden_widened_pass = None if hidden.widened is None else hidden.widened.passed
        summary.selections[mode] = outcome
    return summary


def list_episode_dirs(out_dir: Path) -> list[Path]:
    """Every episode folder of an eval output folder, sorted by name."""
    root = Path(out_dir) / "episodes"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []
