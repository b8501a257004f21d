"""Raw or log speedup reward (the paper's ablation against milestones), clipped.

Reads only the trusted graded :class:`~cuda_agent.schemas.result.CandidateResult`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.result import CandidateResult, Status


class SpeedupConfig(BaseModel):
    """Config block ``plugins.speedup``."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["raw", "log"] = Field("raw", description="'raw': the speedup itself; 'log': its natural log.")
    baseline: Literal["compile", "eager"] = Field("compile", description="Baseline the speedup is measured against.")
    clip_min: float = Field(0.5, gt=0, description="Speedups below this are clipped up to it (before the log).")
    clip_max: float = Field(10.0, gt=0, description="Speedups above this are clipped down to it (caps timer outliers).")
    incorrect: float = Field(-1.0, description="Reward for an incorrect (or unevaluable) graded result.")
    too_large: float = Field(
        0.0, description="Reward when not even one input set of the task fits in the device's memory (status "
        "'too_large'): no signal, since no kernel the policy writes changes that.")

    @model_validator(mode="after")
    def _consistent(self) -> SpeedupConfig:
        if self.clip_min >= self.clip_max:
            raise ValueError(f"clip_min ({self.clip_min}) must be below clip_max ({self.clip_max})")
        lowest = math.log(self.clip_min) if self.mode == "log" else self.clip_min
        if self.incorrect >= lowest:
            raise ValueError(
                f"incorrect ({self.incorrect}) must be below the lowest correct reward ({lowest:.4g} = "
                f"{self.mode} of clip_min), or an incorrect kernel would beat a slow correct one"
            )
        return self


class SpeedupReward:
    """Clipped raw/log speedup of the graded result vs the configured baseline."""

    def __init__(self, config: SpeedupConfig | None = None) -> None:
        self.config = config or SpeedupConfig()

    def score(self, graded: CandidateResult, turn_results: Sequence[CandidateResult] = ()) -> float:
        """Reward of ``graded``; a correct result without a timing counts as speedup ``clip_min``."""
        c = self.config
        if graded.status is Status.too_large:
            return c.too_large
        if not graded.passed:
            return c.incorrect
        value = graded.speedup_compile if c.baseline == "compile" else graded.speedup_eager
        if value is None or not math.isfinite(value):
            value = c.clip_min
        value = min(max(value, c.clip_min), c.clip_max)
        return math.log(value) if c.mode == "log" else value


@hookimpl
def register_rewards(register) -> None:
    """Register ``speedup``."""
    register("speedup", SpeedupReward, config_model=SpeedupConfig)
