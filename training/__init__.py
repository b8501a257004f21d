"""RL for cuda-agent: masked GAE, PPO losses, KL, rollout buffers, DeepSpeed engines,
stage drivers and data synthesis.

Imports ``cuda_agent`` (core) and ``cuda_agent.harness``; never ``cuda_agent.plugins``.
"""
