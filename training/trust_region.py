"""A whole-batch trust region for a PPO step (``ppo.max_kl``): measure, after each optimizer step of the actor, how far
the policy has moved over every policy token of the rollout batch, and take back the step that went past the limit.

Why whole-batch: ``ppo.target_kl`` measures a minibatch's own k3 before its step, so it sees what the earlier steps
did to that minibatch only. On the learning curve's step 4 (session 39, H100, 96 episodes, 6 minibatches) seed 1's
minibatch k3 went 0.0004, 0.0047, then 8.97: a few tokens of the batch fell 11-12 nats inside one update, and the
target stopped it one step too late. Measured over the whole batch after every step, the step that does it is seen
as it happens, and it is the one taken back.

:class:`TrustRegion` holds one :class:`~cuda_agent.training.engines.snapshot.EngineSnapshot` of the actor (weights,
master weights, Adam moments and step counts) and the learner's ``actor_steps`` (the warm-up position). The PPO
update calls :meth:`TrustRegion.before_step` before each actor step and :meth:`TrustRegion.after_step` after it;
a step that takes the batch's k3 past ``max_kl`` is restored and ends the update. So a step past the limit keeps
the largest prefix of its minibatches whose every intermediate policy stayed within the limit (none, when the first
minibatch already goes past: the actor is then exactly what it was before the step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from cuda_agent.training.algorithms import kl_estimate
from cuda_agent.training.engines.snapshot import EngineSnapshot


def batch_drift(new_logp: Tensor, old_logp: Tensor, mask: Tensor) -> dict[str, float]:
    """How far ``new_logp`` moved from ``old_logp`` over the policy tokens (mask 1): mean k3 (the estimator PPO's
    ``approx_kl`` uses, tail-dominated), mean k1 (``old - new``) and the largest fall of one token's log-prob (nats).

    Summed over every data-parallel rank when torch.distributed runs several, so each rank decides alike."""
    m = mask > 0
    k3 = kl_estimate(new_logp, old_logp, "k3")[m].double()
    fall = (old_logp.float() - new_logp.float())[m].double()
    sums = torch.stack([k3.sum(), fall.sum(), torch.tensor(float(m.sum()), dtype=torch.float64, device=k3.device)])
    worst = fall.max() if fall.numel() else torch.zeros((), dtype=torch.float64, device=k3.device)
    if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        torch.distributed.all_reduce(sums)
        torch.distributed.all_reduce(worst, op=torch.distributed.ReduceOp.MAX)
    n = max(float(sums[2]), 1.0)
    return {"k3": float(sums[0]) / n, "k1": float(sums[1]) / n, "max_drop": float(worst), "tokens": float(sums[2])}


@dataclass
class TrustRegion:
    """The whole-batch limit of one PPO step: a snapshot before each actor step, the measure after it."""

    max_kl: float
    actor: object
    #: The policy's log-probs of the batch after the actor's present weights (no gradient).
    measure: Callable[[], Tensor]
    old_logp: Tensor
    mask: Tensor
    snapshot: EngineSnapshot | None = None
    steps_before: int = 0
    #: The measure of the policy as the update leaves it so far (before any step: no move).
    kept: dict[str, float] = field(default_factory=lambda: {"k3": 0.0, "k1": 0.0, "max_drop": 0.0})
    #: The measure of the step that was taken back (None: none was).
    rejected: dict[str, float] | None = None
    kept_steps: int = 0

    def before_step(self, actor_steps: int) -> None:
        """Remember the actor's state (and the learner's ``actor_steps``) before its next optimizer step."""
        if self.snapshot is None:
            self.snapshot = EngineSnapshot(self.actor)
        else:
            self.snapshot.capture()
        self.steps_before = actor_steps

    def after_step(self) -> tuple[dict[str, float], int | None]:
        """Measure the step just taken over the whole batch. Within the limit: kept, returns (measure, None). Past it:
        the actor is restored to :meth:`before_step`'s state and (measure, the ``actor_steps`` to set back) returned;
        the update must end there."""
        with torch.no_grad():
            d = batch_drift(self.measure(), self.old_logp, self.mask)
        if d["k3"] <= self.max_kl:
            self.kept = d
            self.kept_steps += 1
            return d, None
        assert self.snapshot is not None, "after_step without before_step"
        self.snapshot.restore()
        self.rejected = d
        return d, self.steps_before

    def metrics(self) -> dict[str, float]:
        """The step's trust-region figures (docs/training.md lists them)."""
        rej = self.rejected or {}
        return {"trust_kl_k3": self.kept["k3"], "trust_kl_k1": self.kept["k1"], "trust_max_drop": self.kept["max_drop"],
                "trust_rolled_back": float(self.rejected is not None), "trust_minibatches_kept": float(self.kept_steps),
                "trust_rejected_kl_k3": rej.get("k3", 0.0), "trust_rejected_max_drop": rej.get("max_drop", 0.0),
                "trust_snapshot_mib": (self.snapshot.nbytes if self.snapshot is not None else 0) / 2**20}
