"""Built-in stage ``ppo_single_turn``: Stage 1, single-turn PPO warm-up (driver in ``cuda_agent.training.stages.ppo``)."""

from cuda_agent.training.settings import PPOStageConfig
from cuda_agent.training.stages.registration import stage_plugin

register_stages = stage_plugin("ppo_single_turn", "cuda_agent.training.stages.ppo:PPOSingleTurnStage", PPOStageConfig,
                               "Stage 1, single-turn PPO warm-up.")
