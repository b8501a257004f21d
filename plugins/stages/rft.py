"""Built-in stage ``rft``: Stage 2, rejection fine-tuning (driver in ``cuda_agent.training.stages.rft``)."""

from __future__ import annotations

from typing import Any

from cuda_agent.hookspecs import hookimpl
from cuda_agent.training.settings import RFTStageConfig


def build(config: RFTStageConfig) -> Any:
    """Build the stage (the driver module imports torch, so it loads here, not at plugin listing)."""
    from cuda_agent.training.stages.rft import RFTStage

    return RFTStage(config)


@hookimpl
def register_stages(register) -> None:
    """Register ``rft``."""
    register("rft", build, config_model=RFTStageConfig, description="Stage 2, rejection fine-tuning.")
