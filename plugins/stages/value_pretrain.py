"""Built-in stage ``value_pretrain``: Stage 3, critic pretraining on Monte-Carlo returns (driver in ``cuda_agent.training.stages.value_pretrain``)."""

from __future__ import annotations

from typing import Any

from cuda_agent.hookspecs import hookimpl
from cuda_agent.training.settings import ValuePretrainConfig


def build(config: ValuePretrainConfig) -> Any:
    """Build the stage (the driver module imports torch, so it loads here, not at plugin listing)."""
    from cuda_agent.training.stages.value_pretrain import ValuePretrainStage

    return ValuePretrainStage(config)


@hookimpl
def register_stages(register) -> None:
    """Register ``value_pretrain``."""
    register("value_pretrain", build, config_model=ValuePretrainConfig, description="Stage 3, critic pretraining on Monte-Carlo returns.")
