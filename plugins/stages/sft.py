"""Built-in stage ``sft``: supervised fine-tuning on expert episodes (driver in ``cuda_agent.training.stages.sft``)."""

from cuda_agent.training.settings import SFTStageConfig
from cuda_agent.training.stages.registration import stage_plugin

register_stages = stage_plugin("sft", "cuda_agent.training.stages.sft:SFTStage", SFTStageConfig,
                               "Supervised fine-tuning on expert episodes until held-out loss stops improving.")
