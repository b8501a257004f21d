"""Built-in stage ``ppo_single_turn``: Stage 1, single-turn PPO warm-up (driver in ``cuda_agent.training.stages.ppo``)."""

from __future__ import annotations

from typing import Any

from cuda_agent.hookspecs import hookimpl
from cuda_agent.training.settings import PPOStageConfig


def build(config: PPOStageConfig) -> Any:
    """Build the stage (the driver module imports torch, so it loads here, not at plugin listing)."""
    from cuda_agent.training.stages.ppo import PPOSingleTurnStage

    return PPOSingleTurnStage(config)


@hookimpl
def register_stages(register) -> None:
    """Register ``ppo_single_turn``."""
    register("ppo_single_turn", build, config_model=PPOStageConfig, description="Stage 1, single-turn PPO warm-up.")
