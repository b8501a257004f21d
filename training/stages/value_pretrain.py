"""Stage 3: value pretraining. The critic regresses Monte-Carlo returns of the actor's episodes until explained variance passes a gate."""

from __future__ import annotations

from typing import Any

from cuda_agent.training.buffers import collate
from cuda_agent.training.engines.checkpoint import save_critic
from cuda_agent.training.engines.deepspeed_engine import build_frozen_engine
from cuda_agent.training.ppo_update import Learner
from cuda_agent.training.settings import ValuePretrainConfig
from cuda_agent.training.stages.dataset import collect_or_load, minibatch_indices
from cuda_agent.training.stages.driver_base import StageDriver
from cuda_agent.training.stages.episodes import make_source
from cuda_agent.training.stages.runtime import StageRuntime, stable_seed


class ValuePretrainStage(StageDriver):
    """Critic pretraining on Monte-Carlo returns, gated by explained variance."""

    name = "value_pretrain"
    config_model = ValuePretrainConfig

    def train(self, rt: StageRuntime) -> dict[str, Any]:
        """Returns ``{'actor' (unchanged), 'critic', 'explained_variance', 'gate_passed'}``."""
        c = self.config
        actor = build_frozen_engine(rt._lm(rt.actor_source), rt.config.engine)
        critic = rt.build_critic(c.lr)
        source = make_source(rt, c.env, mode="agent" if c.agent_mode else "single_turn", tasks=c.tasks,
                             max_new_tokens=c.max_new_tokens, temperature=c.temperature, rollout=c.rollout)
        episodes = collect_or_load(rt, source, actor, c.collect_episodes, c.trajectories)
        source.close()  # the episode set is fixed from here on: free the rollout engine's memory
        learner = Learner(actor, critic)
        base_seed = stable_seed(rt.config.seed, rt.dir.name, "minibatches") % (2**40)
        everything = collate(episodes)

        def full_ev() -> float:
            import torch

            from cuda_agent.training.algorithms import discounted_returns, explained_variance, place_rewards

            b = everything.to(next(critic.module.parameters()).device)
            with torch.no_grad():
                v = critic(b.input_ids, b.attention_mask)[:, :-1]
            ret = discounted_returns(place_rewards(b.mask, b.rewards, b.turn_rewards), b.mask, c.gamma)
            return explained_variance(v, ret, b.mask)

        def step_fn(step: int) -> dict[str, float]:
            idx = minibatch_indices(len(episodes), c.batch_size, step, base_seed)
            m = learner.value_step(collate([episodes[i] for i in idx]), c.gamma)
            if step % c.eval_every == 0 or step == c.max_steps:
                m["explained_variance_all"] = full_ev()
            return m

        def stop_fn(step: int, m: dict[str, float]) -> bool:
            ev = m.get("explained_variance_all")
            return ev is not None and ev == ev and ev >= c.ev_gate

        last_step, last = rt.run_steps(c.max_steps, {"critic": critic}, step_fn,
                                       checkpoint_every=c.checkpoint_every, stop_fn=stop_fn)
        ev = last.get("explained_variance_all", float("nan"))
        outputs: dict[str, Any] = {
            "actor": rt.actor_source,
            "critic": str(save_critic(critic, rt.dir / "critic.pt")),
            "explained_variance": ev,
            "gate_passed": bool(ev == ev and ev >= c.ev_gate),
            "steps": last_step,
        }
        return outputs
