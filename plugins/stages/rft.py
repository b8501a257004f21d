"""Built-in stage ``rft``: Stage 2, rejection fine-tuning (driver in ``cuda_agent.training.stages.rft``)."""

from cuda_agent.training.settings import RFTStageConfig
from cuda_agent.training.stages.registration import stage_plugin

register_stages = stage_plugin("rft", "cuda_agent.training.stages.rft:RFTStage", RFTStageConfig,
                               "Stage 2, rejection fine-tuning.")
