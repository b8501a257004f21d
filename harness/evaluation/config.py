"""``EvalConfig``: the run config plus an ``eval`` block (``cuda-agent eval``).

Fields of :class:`EvalBlock` listed in :data:`EXECUTION_ONLY_FIELDS` change
how fast an evaluation runs, not what it measures; resuming may change them
freely. Any other difference from the saved config refuses to resume.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cuda_agent.config import RunConfig, StrictModel, without_secrets
from cuda_agent.schemas.task import TaskManifest

SelectionMode = Literal["best", "final", "first_passing"]

#: eval.* fields a resumed run may change (scheduling only).
EXECUTION_ONLY_FIELDS: tuple[str, ...] = ("concurrency", "build_workers", "device_steps", "devices", "progress",
                                          "retry_errors")


class EvalBlock(StrictModel):
    """How ``cuda-agent eval`` runs a set of tasks."""

    tasks: str | None = Field(
        None, description="Task source spec (e.g. 'folder:examples/tasks', 'kernelbench:/data/KB?levels=1&ids=1-10'); required."
    )
    seeds: int = Field(1, ge=1, description="Episodes per task; episode k runs with RunConfig.seed + k.")
    limit: int | None = Field(None, ge=1, description="Take at most this many tasks from the source (in its order).")
    concurrency: int = Field(4, ge=1, description="Episodes in flight at once (an API policy mostly waits).")
    build_workers: int = Field(2, ge=1, description="Compile calls running at once (the CPU build pool).")
    device_steps: int = Field(
        1, ge=1,
        description="Device steps (verify, profile, grade after their build) of one device slot running at once. "
                    "Timed batches stay alone on the device whatever this is (they take the device lock "
                    "exclusively); more than 1 overlaps the untimed parts (runner start-up, set making, checks). "
                    "The evaluator's memory budget still bounds what they hold on the device together.",
    )
    devices: list[int] | None = Field(
        None,
        description="Device slots, one backend each: GPU indices for 'cuda' (None = every visible GPU); "
        "for 'cpu', slot ids (None = one slot).",
    )
    selections: list[SelectionMode] = Field(
        default_factory=lambda: ["best", "final", "first_passing"],
        description="Selection modes whose candidates are re-graded by the trusted grading pass.",
    )
    regrade: bool = Field(True, description="Re-grade each selected candidate (backend.grade on its restored snapshot).")
    budget_regrade: bool = Field(
        True, description="Regrade the best-of-first-k candidate at each budget point k (the budget curves' points); "
        "one trusted grading per distinct snapshot, so usually a few per episode."
    )
    budget_points: list[int] | None = Field(
        None, description="Turn budgets k regraded for the budget curves; None = 1, 2, 4, ... and agent.max_turns."
    )
    hidden: bool = Field(True, description="Hidden re-verification (held-out seeds, widened inputs) of selected candidates.")
    hidden_modes: list[SelectionMode] = Field(
        default_factory=lambda: ["best"], description="Selection modes whose regraded-correct candidates get hidden checks."
    )
    widen_factor: float = Field(
        4.0, gt=1.0, description="Widened inputs span this many times the task's sampled range (clipped to the declared domain)."
    )
    probe: bool = Field(True, description="Probe each task (shapes, dtypes, domains) with cuda_agent.harness.tasks before running.")
    progress: bool = Field(True, description="Show a progress bar with ETA.")
    retry_errors: bool = Field(
        False, description="On resume, re-run episodes that ended in a runner error, a policy error (a server that was "
        "down, a refused key) or a harness error; without it they stay counted as failures."
    )


class EvalConfig(RunConfig):
    """Configuration of ``cuda-agent eval``: a RunConfig (policy, backend, agent...) plus ``eval``."""

    eval: EvalBlock = Field(default_factory=EvalBlock, description="Evaluation settings.")

    def run_config(self, seed_index: int = 0, task: TaskManifest | None = None) -> RunConfig:
        """The RunConfig of one episode: ``seed`` offset by the seed index, task placeholders filled.

        The policy spec may name per-task files with ``{task_name}`` (the
        manifest's short name) or ``{task_id}`` (its id with '/' -> '--'),
        e.g. ``scripted:scripts/{task_name}.yaml``.
        """
        data = self.model_dump(exclude={"eval"})
        data["seed"] = self.seed + seed_index
        if task is not None:
            data["policy"] = fill_task_placeholders(self.policy, task)
        return RunConfig.model_validate(data)


def fill_task_placeholders(text: str, task: TaskManifest) -> str:
    """``text`` with ``{task_name}`` and ``{task_id}`` replaced (other braces untouched)."""
    return text.replace("{task_name}", task.name).replace("{task_id}", task.id.replace("/", "--"))


def comparable(config: EvalConfig) -> dict:
    """The config without its secrets and execution-only fields (what resume compares)."""
    data = without_secrets(config)
    for key in EXECUTION_ONLY_FIELDS:
        data.get("eval", {}).pop(key, None)
    return data
