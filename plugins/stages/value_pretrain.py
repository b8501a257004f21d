"""Built-in stage ``value_pretrain``: Stage 3, critic pretraining on Monte-Carlo returns (driver in ``cuda_agent.training.stages.value_pretrain``)."""

from cuda_agent.training.settings import ValuePretrainConfig
from cuda_agent.training.stages.registration import stage_plugin

register_stages = stage_plugin("value_pretrain", "cuda_agent.training.stages.value_pretrain:ValuePretrainStage",
                               ValuePretrainConfig, "Stage 3, critic pretraining on Monte-Carlo returns.")
