"""acme-reward: an example third-party cuda-agent plugin.

Registers the reward ``acme_bonus``: the paper's milestone ladder
(-1 / 1 / 2 / 3) plus ``bonus`` when the graded kernel is at least
``bonus_speedup`` times faster than torch.compile. Select it with
``reward: acme_bonus`` and configure it under ``plugins.acme_bonus``.

It is found through the entry point ``[project.entry-points.cuda_agent]
acme = "acme_reward"`` and tested with ``cuda_agent.testing``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.result import CandidateResult

#: The hookspec version this plugin was written for (checked at load time).
CUDA_AGENT_HOOKSPEC_VERSION = "1.0"


class AcmeBonusConfig(BaseModel):
    """Config block ``plugins.acme_bonus``."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(1.05, gt=0, description="Milestone threshold: a speedup above it counts as faster.")
    bonus_speedup: float = Field(2.0, gt=1, description="Speedup over torch.compile that earns the bonus.")
    bonus: float = Field(0.5, ge=0, description="Added to the milestone value when the bonus speedup is reached.")


class AcmeBonusReward:
    """Milestones plus a bonus for kernels far ahead of torch.compile."""

    def __init__(self, config: AcmeBonusConfig | None = None) -> None:
        self.config = config or AcmeBonusConfig()

    def score(self, graded: CandidateResult, turn_results: Sequence[CandidateResult] = ()) -> float:
        """Milestone value of the graded result, plus the bonus."""
        c = self.config
        if not graded.passed:
            return -1.0
        eager = (graded.speedup_eager or 0.0) > c.threshold
        compiled = (graded.speedup_compile or 0.0) > c.threshold
        value = 3.0 if eager and compiled else 2.0 if eager else 1.0
        if (graded.speedup_compile or 0.0) >= c.bonus_speedup:
            value += c.bonus
        return value


@hookimpl
def register_rewards(register) -> None:
    """Register ``acme_bonus``."""
    register("acme_bonus", AcmeBonusReward, config_model=AcmeBonusConfig)
