"""Stage 2: rejection fine-tuning. Keep episodes with reward above a threshold; supervised loss on the policy's tokens only."""

from __future__ import annotations

from typing import Any

from cuda_agent.errors import ConfigError
from cuda_agent.training.buffers import collate
from cuda_agent.training.engines.checkpoint import export_actor_hf
from cuda_agent.training.ppo_update import Learner
from cuda_agent.training.settings import RFTStageConfig
from cuda_agent.training.stages.dataset import collect_or_load, minibatch_indices
from cuda_agent.training.stages.driver_base import StageDriver
from cuda_agent.training.stages.episodes import make_source
from cuda_agent.training.stages.runtime import StageRuntime, stable_seed


class RFTStage(StageDriver):
    """Rejection fine-tuning of the actor."""

    name = "rft"
    config_model = RFTStageConfig

    def train(self, rt: StageRuntime) -> dict[str, Any]:
        """Collect, filter, fine-tune; return ``{'actor', 'critic'?, 'kept', 'collected'}``."""
        c = self.config
        actor = rt.build_actor(c.lr)
        source = make_source(rt, c.env, mode="agent" if c.agent_mode else "single_turn", tasks=c.tasks,
                             max_new_tokens=c.max_new_tokens, temperature=c.temperature, rollout=c.rollout)
        episodes = collect_or_load(rt, source, actor, c.collect_episodes, c.trajectories)
        source.close()  # the episode set is fixed from here on: free the rollout engine's memory
        kept = [e for e in episodes if e.reward > c.reward_threshold and e.n_policy_tokens > 0]
        rt.log(0, {"rft_collected": len(episodes), "rft_kept": len(kept),
                   "reward_mean": sum(e.reward for e in episodes) / len(episodes),
                   "pass_rate": sum(e.success for e in episodes) / len(episodes)})
        if not kept:
            raise ConfigError(
                f"rft: none of {len(episodes)} episodes has reward > {c.reward_threshold}; "
                "collect more episodes, lower reward_threshold, or skip this stage"
            )
        learner = Learner(actor)
        base_seed = stable_seed(rt.config.seed, rt.dir.name, "minibatches") % (2**40)

        def step_fn(step: int) -> dict[str, float]:
            idx = minibatch_indices(len(kept), c.batch_size, step, base_seed)
            return learner.sft_step(collate([kept[i] for i in idx]), c.aggregation)

        last_step, last = rt.run_steps(c.steps, {"actor": actor}, step_fn, checkpoint_every=c.checkpoint_every)
        outputs: dict[str, Any] = {"actor": str(export_actor_hf(actor, rt.dir / "actor", rt.tokenizer_dir)),
                                   "kept": len(kept), "collected": len(episodes), "steps": last_step, "metrics": last}
        if rt.ctx.inputs.get("critic"):
            outputs["critic"] = rt.ctx.inputs["critic"]
        return outputs
