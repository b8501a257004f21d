"""PPO stage driver, shared by ``ppo_single_turn`` and ``ppo_agentic``.

Each step: collect episodes (toy or kernel environment) with the current
actor (``rollout.engine``: the actor itself / the hf policy, or a vLLM engine
whose weights are pushed after every update), score them with actor / reference / critic, GAE over policy tokens,
clipped updates of actor and critic, metrics to the loggers, a checkpoint
every ``checkpoint_every`` steps. Outputs: the actor exported to HF format
and the critic's state dict.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import torch

from cuda_agent.training.buffers import Episode, collate
from cuda_agent.training.engines.checkpoint import export_actor_hf, save_critic
from cuda_agent.training.ppo_update import Learner
from cuda_agent.training.settings import PPOStageConfig
from cuda_agent.training.stages.driver_base import StageDriver
from cuda_agent.training.stages.episodes import make_source, save_rollouts
from cuda_agent.training.stages.runtime import StageRuntime


class PPOStage(StageDriver):
    """A PPO stage; ``mode`` is 'single_turn' (ppo_single_turn) or 'agent' (ppo_agentic)."""

    name = "ppo"
    config_model = PPOStageConfig
    mode: Literal["agent", "single_turn"] = "agent"

    def train(self, rt: StageRuntime) -> dict[str, Any]:
        """Train; return ``{'actor': hf_dir, 'critic': pt_file, 'metrics': last}``."""
        c = self.config
        s = c.ppo
        actor = rt.build_actor(c.actor_lr)
        critic = rt.build_critic(c.critic_lr) if s.use_critic else None
        reference = rt.build_reference() if s.kl_coef > 0 else None
        learner = Learner(actor, critic, reference)
        source = make_source(rt, c.env, mode=self.mode, tasks=c.tasks, max_new_tokens=c.max_new_tokens,
                             temperature=c.temperature, rollout=c.rollout)

        def collect(n: int, step: int, gen: torch.Generator, tag: str) -> list[Episode]:
            episodes = source.collect(actor, n, step, gen)
            if c.rollout.save_episodes:
                save_rollouts(rt, tag, episodes)
            return episodes

        extra: dict[str, float] = {}
        if c.eval_samples and hasattr(source, "env") and not (rt.ckpt_dir.exists() and any(rt.ckpt_dir.iterdir())):
            eps = collect(c.eval_samples, 0, rt.generator(0, "eval"), "eval_start")
            extra["eval_pass_rate_start"] = sum(e.success for e in eps) / len(eps)
            rt.log(0, extra)

        def step_fn(step: int) -> dict[str, float]:
            t0 = time.perf_counter()
            episodes = collect(c.episodes_per_step, step, rt.generator(step), f"step_{step:05d}")
            t1 = time.perf_counter()
            metrics = learner.ppo_step(collate(episodes), s)
            metrics["rollout_s"] = t1 - t0
            metrics["step_s"] = time.perf_counter() - t0
            return metrics

        def stop_fn(step: int, m: dict[str, float]) -> bool:
            return c.target_pass_rate is not None and m.get("pass_rate", 0.0) >= c.target_pass_rate

        last_step, last = rt.run_steps(c.steps, {"actor": actor, "critic": critic}, step_fn,
                                       checkpoint_every=c.checkpoint_every, stop_fn=stop_fn)
        if c.eval_samples and hasattr(source, "env"):
            eps = collect(c.eval_samples, 0, rt.generator(last_step, "eval_end"), "eval_end")
            end = {"eval_pass_rate_end": sum(e.success for e in eps) / len(eps)}
            rt.log(last_step, end)
            last = {**last, **end}
        outputs: dict[str, Any] = {"actor": str(export_actor_hf(actor, rt.dir / "actor", rt.tokenizer_dir)),
                                   "metrics": last, "steps": last_step}
        if critic is not None:
            outputs["critic"] = str(save_critic(critic, rt.dir / "critic.pt"))
        elif rt.ctx.inputs.get("critic"):
            outputs["critic"] = rt.ctx.inputs["critic"]
        return outputs


class PPOSingleTurnStage(PPOStage):
    """Stage 1: single-turn PPO warm-up (one response holds the whole solution)."""

    name = "ppo_single_turn"
    mode = "single_turn"


class PPOAgenticStage(PPOStage):
    """Stage 4: multi-turn agentic PPO through the agent loop."""

    name = "ppo_agentic"
    mode = "agent"
