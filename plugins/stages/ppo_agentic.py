"""Built-in stage ``ppo_agentic``: Stage 4, multi-turn agentic PPO (driver in ``cuda_agent.training.stages.ppo``)."""

from __future__ import annotations

from typing import Any

from cuda_agent.hookspecs import hookimpl
from cuda_agent.training.settings import PPOStageConfig


def build(config: PPOStageConfig) -> Any:
    """Build the stage (the driver module imports torch, so it loads here, not at plugin listing)."""
    from cuda_agent.training.stages.ppo import PPOAgenticStage

    return PPOAgenticStage(config)


@hookimpl
def register_stages(register) -> None:
    """Register ``ppo_agentic``."""
    register("ppo_agentic", build, config_model=PPOStageConfig, description="Stage 4, multi-turn agentic PPO.")
