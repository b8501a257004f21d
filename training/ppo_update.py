"""One PPO iteration over a rollout batch: score, advantages, clipped updates of actor and critic.

Also the supervised updates the other stages need: :meth:`Learner.sft_step`
(RFT: negative log-likelihood of the policy's own tokens only) and
:meth:`Learner.value_step` (critic regression on Monte-Carlo returns).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from cuda_agent.training.algorithms import (
    aggregate,
    compute_gae,
    discounted_returns,
    explained_variance,
    group_baseline_advantages,
    kl_estimate,
    kl_penalized_rewards,
    logprobs_and_entropy,
    masked_mean,
    masked_rescale,
    masked_whiten,
    place_rewards,
    policy_loss,
    sequence_lengths,
    value_loss,
)
from cuda_agent.training.attention import attention_backends
from cuda_agent.training.buffers import RolloutBatch
from cuda_agent.training.engines.deepspeed_engine import set_learning_rate
from cuda_agent.training.settings import PPOSettings
from cuda_agent.training.trust_region import TrustRegion


def linear_warmup(lr: float, steps: int) -> Callable[[int], float]:
    """A :attr:`Learner.actor_lr_at` schedule: the rate rises linearly to ``lr`` over the first ``steps`` steps."""
    return lambda k: lr * min(1.0, (k + 1) / steps)


@dataclass
class Learner:
    """Actor (+ critic, + frozen reference) engines and the updates on them."""

    actor: Any
    critic: Any | None = None
    reference: Any | None = None
    logit_chunk: int = 4096
    #: The actor's learning rate at each of its optimizer steps (0, 1, ...), set before the step; None: the engine's.
    actor_lr_at: Callable[[int], float] | None = None
    #: Actor optimizer steps taken by this learner.
    actor_steps: int = 0
    #: The metrics of each minibatch of the last :meth:`ppo_step`, in order (the step's own are their means); with
    #: ``ppo.max_kl`` each stepped one also has the whole batch's ``batch_kl_k3``, ``batch_kl_k1``, ``batch_max_drop``
    #: after its step, and the one taken back ``trust_rolled_back``.
    last_minibatches: list[dict[str, float]] = field(default_factory=list)

    def _device(self) -> torch.device:
        return next(self.actor.module.parameters()).device

    @staticmethod
    def _mask_arg(batch: RolloutBatch) -> Tensor | None:
        """The attention mask, or None when no position is padding (SDPA then takes its causal flash path)."""
        am = batch.attention_mask
        return None if bool(am.all()) else am

    def _actor_logp(self, batch: RolloutBatch, engine: Any, with_entropy: bool) -> tuple[Tensor, Tensor | None]:
        with attention_backends():  # the kernels the rollouts sampled with
            out = engine(input_ids=batch.input_ids, attention_mask=self._mask_arg(batch), use_cache=False)
        logits = out.logits[:, :-1]
        return logprobs_and_entropy(logits, batch.input_ids[:, 1:], with_entropy=with_entropy, chunk=self.logit_chunk)

    def _values(self, batch: RolloutBatch) -> Tensor:
        assert self.critic is not None
        return self.critic(batch.input_ids, self._mask_arg(batch))[:, :-1]

    @torch.no_grad()
    def score(self, batch: RolloutBatch, parts: int = 1) -> dict[str, Tensor]:
        """Old log-probs, reference log-probs and values of a batch (no gradient).

        With ``parts > 1`` the batch is scored in the same interleaved sub-batches the update uses, each
        trimmed to its own longest episode: no forward over padding, and a one-episode part has no mask at all.
        """
        return self._by_parts(batch, parts, self._score_one)

    @torch.no_grad()
    def policy_logp(self, batch: RolloutBatch, parts: int = 1) -> Tensor:
        """The actor's log-probs of the batch's tokens (no gradient), scored in ``parts`` like :meth:`score`."""
        return self._by_parts(batch, parts, lambda b: {"logp": self._actor_logp(b, self.actor, with_entropy=False)[0]})["logp"]

    @staticmethod
    def _by_parts(batch: RolloutBatch, parts: int, fn: Callable[[RolloutBatch], dict[str, Tensor]]) -> dict[str, Tensor]:
        B = batch.size
        parts = max(1, min(parts, B))
        if parts == 1:
            return fn(batch)
        T = batch.input_ids.shape[1] - 1
        out: dict[str, Tensor] = {}
        for p in range(parts):
            idx = list(range(p, B, parts))
            it = torch.tensor(idx, device=batch.input_ids.device)
            for k, v in fn(batch.select(idx)).items():
                full = out.setdefault(k, torch.zeros(B, T, dtype=v.dtype, device=v.device))
                full[it, : v.shape[1]] = v
        return out

    def _score_one(self, batch: RolloutBatch) -> dict[str, Tensor]:
        out: dict[str, Tensor] = {}
        out["old_logp"], _ = self._actor_logp(batch, self.actor, with_entropy=False)
        if self.reference is not None:
            out["ref_logp"], _ = self._actor_logp(batch, self.reference, with_entropy=False)
        if self.critic is not None:
            out["values"] = self._values(batch)
        return out

    def advantages(self, batch: RolloutBatch, scored: dict[str, Tensor], s: PPOSettings) -> tuple[Tensor, Tensor, dict[str, float]]:
        """Token rewards (outcome on the last policy token, KL penalty if in reward) -> (advantages, returns)."""
        mask = batch.mask
        rewards = place_rewards(mask, batch.rewards, batch.turn_rewards)
        metrics: dict[str, float] = {}
        if "ref_logp" in scored:
            kl = kl_estimate(scored["old_logp"], scored["ref_logp"], s.kl_estimator)
            metrics["kl"] = float(masked_mean(kl, mask))
            if s.kl_mode == "reward" and s.kl_coef > 0:
                rewards = kl_penalized_rewards(rewards, scored["old_logp"], scored["ref_logp"], mask, s.kl_coef, s.kl_estimator)
        if s.use_critic and "values" in scored:
            adv, ret = compute_gae(rewards, scored["values"], mask, s.gamma, s.lam)
        else:
            ret = discounted_returns(rewards, mask, s.gamma)
            adv = ret.clone()
        if s.baseline == "group":  # the critic (if any) still learns from ret; the advantages use the group
            if batch.groups is None:
                raise ValueError("ppo.baseline 'group' needs episodes with meta['group'] (samples_per_task > 1 in "
                                 "the stage); this batch has none")
            adv = group_baseline_advantages(discounted_returns(rewards, mask, s.gamma), mask, batch.groups)
            metrics["groups"] = float(batch.groups.unique().numel())
        if s.whiten_advantages:  # group: scaled only, so a group that failed (or passed) alike stays at zero
            adv = masked_rescale(adv, mask) if s.baseline == "group" else masked_whiten(adv, mask)
        if s.negative_scale != 1.0:
            adv = torch.where(adv < 0, adv * s.negative_scale, adv)
        return adv, ret, metrics

    def ppo_step(self, batch: RolloutBatch, s: PPOSettings) -> dict[str, float]:
        """Score the batch, compute advantages, run the clipped updates; returns the step's metrics."""
        t0 = time.perf_counter()
        batch = batch.to(self._device())
        B = batch.size
        parts = max(1, min(s.minibatches, B))
        scored = self.score(batch, parts)
        adv, ret, metrics = self.advantages(batch, scored, s)
        metrics.update(behaviour_gap(scored["old_logp"], batch.rollout_logp, batch.mask))
        if "values" in scored:
            metrics["explained_variance"] = explained_variance(scored["values"], ret, batch.mask)
            metrics["value_mean"] = float(masked_mean(scored["values"], batch.mask))
        sums: dict[str, list[float]] = {}
        self.last_minibatches = []
        # ppo.max_kl: each actor step is measured over the whole batch, and the one past the limit taken back
        trust = TrustRegion(s.max_kl, self.actor, lambda: self.policy_logp(batch, parts), scored["old_logp"],
                            batch.mask) if s.max_kl is not None else None
        stopped = False
        for _epoch in range(s.ppo_epochs):
            if stopped:
                break
            for p in range(parts):
                idx = list(range(p, B, parts))
                it = torch.tensor(idx, device=batch.input_ids.device)
                mb = batch.select(idx) if parts > 1 else batch
                L = mb.input_ids.shape[1] - 1
                sl = lambda x: x[it, :L] if parts > 1 else x  # noqa: E731
                m = self._update_minibatch(mb, sl(scored["old_logp"]), sl(adv), sl(ret), s,
                                           sl(scored["ref_logp"]) if "ref_logp" in scored else None,
                                           sl(scored["values"]) if "values" in scored else None, trust)
                self.last_minibatches.append(dict(m))
                for k, v in m.items():
                    if not k.startswith(("batch_", "trust_")):  # whole-batch figures: the trust metrics below
                        sums.setdefault(k, []).append(v)
                if m.get("kl_stopped") or m.get("trust_rolled_back"):
                    stopped = True
                    break
        metrics.update({k: sum(v) / len(v) for k, v in sums.items()})
        metrics["approx_kl_max"] = max(sums.get("approx_kl", [0.0]))
        metrics["log_ratio_min"] = min(sums.get("log_ratio_min", [0.0]))  # the worst token of any minibatch
        metrics["collapsed_frac_max"] = max(sums.get("collapsed_frac", [0.0]))
        # optimizer steps the policy kept: not the one target_kl stopped before, nor the one the trust region took back
        metrics["update_minibatches"] = float(sum(1 for r in self.last_minibatches
                                                  if not r.get("kl_stopped") and not r.get("trust_rolled_back")))
        metrics["kl_stopped"] = float(any(r.get("kl_stopped") for r in self.last_minibatches))
        if trust is not None:
            metrics.update(trust.metrics())
        metrics.update(rollout_metrics(batch))
        dt = time.perf_counter() - t0
        metrics["update_s"] = dt
        metrics["tokens_per_s"] = float(batch.attention_mask.sum()) * s.ppo_epochs / max(dt, 1e-9)
        return metrics

    def _update_minibatch(self, mb, old_logp, adv, ret, s: PPOSettings, ref_logp, old_values,
                          trust: TrustRegion | None = None) -> dict[str, float]:
        mask = mb.mask
        logp, ent = self._actor_logp(mb, self.actor, with_entropy=True)
        rollout = mb.rollout_logp if s.is_cap is not None else None
        pl, m = policy_loss(logp, old_logp, adv, mask, clip_low=s.clip_low, clip_high=s.clip_high,
                            aggregation=s.aggregation, rollout_logp=rollout, is_cap=s.is_cap)
        if s.target_kl is not None and m["approx_kl"] > s.target_kl:
            return {**m, "kl_stopped": 1.0}  # the update ends here: this minibatch is not stepped
        loss = pl
        assert ent is not None
        entropy = aggregate(ent, mask, s.aggregation)
        if s.entropy_coef > 0:
            loss = loss - s.entropy_coef * entropy
        if ref_logp is not None and s.kl_mode == "loss" and s.kl_coef > 0:
            loss = loss + s.kl_coef * aggregate(kl_estimate(logp, ref_logp, s.kl_estimator), mask, s.aggregation)
        self.actor.backward(loss)
        if trust is not None:
            trust.before_step(self.actor_steps)
        if self.actor_lr_at is not None:
            set_learning_rate(self.actor, self.actor_lr_at(self.actor_steps))
        self.actor.step()
        self.actor_steps += 1
        m.update({"policy_loss": float(pl.detach()), "entropy": float(entropy.detach())})
        gn = self.actor.get_global_grad_norm() if hasattr(self.actor, "get_global_grad_norm") else None
        if gn is not None and math.isfinite(float(gn)):
            m["grad_norm"] = float(gn)
        if trust is not None:
            drift, steps_back = trust.after_step()
            m.update({"batch_kl_k3": drift["k3"], "batch_kl_k1": drift["k1"], "batch_max_drop": drift["max_drop"]})
            if steps_back is not None:  # taken back (weights, Adam state, warm-up position): the update ends here,
                self.actor_steps = steps_back  # before this minibatch's critic step, as target_kl ends it
                return {**m, "trust_rolled_back": 1.0}
        if self.critic is not None and s.use_critic and old_values is not None:
            values = self._values(mb)
            vl, vm = value_loss(values, old_values, ret, mask, clip=s.value_clip, aggregation=s.aggregation)
            self.critic.backward(s.vf_coef * vl)
            self.critic.step()
            m.update({"value_loss": float(vl.detach()), **vm})
        return m

    def sft_step(self, batch: RolloutBatch, aggregation: str = "token_mean") -> dict[str, float]:
        """One supervised step on the policy's own tokens (mask 1) only: RFT."""
        batch = batch.to(self._device())
        logp, _ = self._actor_logp(batch, self.actor, with_entropy=False)
        loss = -aggregate(logp, batch.mask, aggregation)
        self.actor.backward(loss)
        self.actor.step()
        return {"sft_loss": float(loss.detach()), "policy_tokens": float(batch.mask.sum())}

    def value_step(self, batch: RolloutBatch, gamma: float = 1.0, aggregation: str = "token_mean") -> dict[str, float]:
        """One critic regression step on Monte-Carlo returns; reports explained variance before the step."""
        assert self.critic is not None, "value_step needs a critic engine"
        batch = batch.to(self._device())
        ret = discounted_returns(place_rewards(batch.mask, batch.rewards, batch.turn_rewards), batch.mask, gamma)
        values = self._values(batch)
        vl, _ = value_loss(values, values.detach(), ret, batch.mask, clip=None, aggregation=aggregation)
        ev = explained_variance(values.detach(), ret, batch.mask)
        self.critic.backward(vl)
        self.critic.step()
        return {"value_loss": float(vl.detach()), "explained_variance": ev}


def behaviour_gap(old_logp: Tensor, rollout_logp: Tensor, mask: Tensor) -> dict[str, float]:
    """How far the rollout engine's log-probs are from the trainer's on the policy's tokens (before the update).

    Near 0 means on-policy rollouts; a stale rollout engine or a numerics mismatch shows here first.
    """
    gap = (old_logp.detach().float() - rollout_logp.float()).abs() * mask
    return {"rollout_logp_gap_mean": float(masked_mean(gap, mask)), "rollout_logp_gap_max": float(gap.max()) if gap.numel() else 0.0}


def rollout_metrics(batch: RolloutBatch) -> dict[str, float]:
    """Reward mean and distribution, pass rate, turns and response lengths of a batch."""
    r = batch.rewards.float().cpu()
    out = {
        "reward_mean": float(r.mean()),
        "reward_std": float(r.std()) if r.numel() > 1 else 0.0,
        "reward_min": float(r.min()),
        "reward_max": float(r.max()),
        "pass_rate": float(batch.success.float().mean()),
        "turns_mean": float(batch.turns.float().mean()),
        "response_tokens_mean": float(sequence_lengths(batch.mask).mean()),
        "episodes": float(batch.size),
    }
    for value in sorted(set(r.tolist()))[:8]:
        out[f"reward_frac[{value:g}]"] = float((r == value).float().mean())
    return out
