"""The paper's milestone reward: -1 incorrect, 1 correct, 2 faster than eager, 3 faster than both.

"Faster" means speedup above ``threshold`` (paper: 1.05, i.e. more than 5 %).
Reads only the trusted graded :class:`~cuda_agent.schemas.result.CandidateResult`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.result import CandidateResult, Status


class MilestoneConfig(BaseModel):
    """Config block ``plugins.milestone``."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(1.05, gt=0, description="A speedup must exceed this to count as faster (paper: 1.05).")
    incorrect: float = Field(-1.0, description="Reward when the graded result is not correct.")
    correct: float = Field(1.0, description="Correct but not faster than eager.")
    faster_than_eager: float = Field(2.0, description="Correct and faster than eager PyTorch.")
    faster_than_both: float = Field(3.0, description="Correct and faster than both eager and torch.compile.")
    too_large: float = Field(
        0.0, description="Reward when the task could not be graded because not even one input set fits in the "
        "device's memory (status 'too_large'): no signal, since no kernel the policy writes changes that.")

    @model_validator(mode="after")
    def _ordered(self) -> MilestoneConfig:
        ladder = [self.incorrect, self.correct, self.faster_than_eager, self.faster_than_both]
        if ladder != sorted(ladder) or len(set(ladder)) != 4:
            raise ValueError(
                f"milestone values must increase: incorrect < correct < faster_than_eager < faster_than_both, got {ladder}"
            )
        return self


class MilestoneReward:
    """Milestone ladder over the graded result's speedups."""

    def __init__(self, config: MilestoneConfig | None = None) -> None:
        self.config = config or MilestoneConfig()

    def score(self, graded: CandidateResult, turn_results: Sequence[CandidateResult] = ()) -> float:
        """Milestone value of ``graded`` (``turn_results`` are ignored: only grading counts)."""
        c = self.config
        if graded.status is Status.too_large:
            return c.too_large
        if not graded.passed:
            return c.incorrect
        eager = graded.speedup_eager is not None and graded.speedup_eager > c.threshold
        both = eager and graded.speedup_compile is not None and graded.speedup_compile > c.threshold
        if both:
            return c.faster_than_both
        return c.faster_than_eager if eager else c.correct


@hookimpl
def register_rewards(register) -> None:
    """Register ``milestone``."""
    register("milestone", MilestoneReward, config_model=MilestoneConfig)
