"""Built-in stage ``ppo_agentic``: Stage 4, multi-turn agentic PPO (driver in ``cuda_agent.training.stages.ppo``)."""

from cuda_agent.training.settings import PPOStageConfig
from cuda_agent.training.stages.registration import stage_plugin

register_stages = stage_plugin("ppo_agentic", "cuda_agent.training.stages.ppo:PPOAgenticStage", PPOStageConfig,
                               "Stage 4, multi-turn agentic PPO.")
