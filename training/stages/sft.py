"""Stage ``sft``: supervised fine-tuning on expert episodes until held-out loss stops improving.

The loss is the policy tokens' negative log-likelihood (mask 1: what the assistant wrote), the same
quantity RFT minimises; observation tokens are context only. Every ``eval_every`` steps the loss on the
held-out episodes is measured; the best weights so far are kept (``<stage>/best_actor.pt``) and the stage
stops once ``patience`` evaluations in a row did not improve by ``min_delta``. The exported actor is the
best one. Learning rate: linear warm-up, then cosine decay to ``min_lr_ratio`` of the peak over the
planned steps. Outputs: ``{'actor', 'critic'?, 'best_heldout_loss', 'best_step', 'steps', 'metrics'}``.
"""

from __future__ import annotations

import glob
import math
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.errors import ConfigError
from cuda_agent.training.algorithms import aggregate
from cuda_agent.training.buffers import Episode, collate
from cuda_agent.training.engines.checkpoint import export_actor_hf
from cuda_agent.training.kernel_family.corpus import episode_from_saved
from cuda_agent.training.ppo_update import Learner
from cuda_agent.training.settings import SFTStageConfig
from cuda_agent.training.stages.dataset import episodes_from_files, minibatch_indices
from cuda_agent.training.stages.driver_base import StageDriver
from cuda_agent.training.stages.runtime import StageRuntime, stable_seed


def load_episodes(specs: list[str], where: str) -> list[Episode]:
    """Episodes from ``.pt`` files (Episode dicts) and trajectory.jsonl glob patterns, in the order given."""
    out: list[Episode] = []
    for spec in specs:
        if spec.endswith(".pt"):
            files = sorted(glob.glob(spec)) or ([spec] if Path(spec).exists() else [])
            if not files:
                raise ConfigError(f"{where}: episode file {spec} does not exist")
            for f in files:
                out += [episode_from_saved(d) for d in torch.load(f, weights_only=False)]
        else:
            found = episodes_from_files([spec])
            if not found:
                raise ConfigError(f"{where}: no complete trajectory.jsonl matches {spec!r}")
            out += found
    return out


def lr_at(step: int, total: int, peak: float, warmup: int, floor: float) -> float:
    """Warm-up then cosine learning rate at ``step`` (1-based) of ``total``."""
    if warmup and step <= warmup:
        return peak * step / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def set_lr(engine: Any, lr: float) -> None:
    """Set the learning rate of every parameter group of an engine's optimizer."""
    for group in engine.optimizer.param_groups:
        group["lr"] = lr


@torch.no_grad()
def heldout_loss(learner: Learner, episodes: list[Episode], batch_size: int, aggregation: str = "token_mean") -> float:
    """Policy-token NLL over ``episodes`` (token-weighted mean over batches)."""
    total, weight = 0.0, 0.0
    engine = learner.actor
    was_training = engine.module.training
    engine.module.eval()
    try:
        for start in range(0, len(episodes), batch_size):
            batch = collate(episodes[start:start + batch_size]).to(learner._device())
            logp, _ = learner._actor_logp(batch, engine, with_entropy=False)
            n = float(batch.mask.sum())
            total += float(-aggregate(logp.float(), batch.mask, aggregation)) * n
            weight += n
    finally:
        engine.module.train(was_training)
    return total / max(weight, 1.0)


class SFTStage(StageDriver):
    """Supervised fine-tuning of the actor on expert episodes with early stopping on held-out loss."""

    name = "sft"
    config_model = SFTStageConfig

    def train(self, rt: StageRuntime) -> dict[str, Any]:
        """Fine-tune; return the best actor's export and the stopping record."""
        c: SFTStageConfig = self.config
        if not c.train:
            return self.evaluate_only(rt)
        train = load_episodes(c.episodes, "sft.episodes")[c.offset:]
        if c.limit is not None:
            train = train[:c.limit]
        held = load_episodes(c.heldout, "sft.heldout") if c.heldout else []
        train = [e for e in train if e.n_policy_tokens > 0]
        if not train:
            raise ConfigError("sft: no training episode with policy tokens (check 'episodes', 'offset' and 'limit')")
        actor = rt.build_actor(c.lr)
        learner = Learner(actor)
        per_epoch = max(1, -(-len(train) // c.batch_size))
        total = max(1, int(round(c.epochs * per_epoch)))
        base_seed = stable_seed(rt.config.seed, rt.dir.name, "sft") % (2**40)
        best_path = rt.dir / "best_actor.pt"
        state: dict[str, Any] = {"best": math.inf, "best_step": 0, "bad": 0}
        if best_path.exists() and rt.ctx.resume:
            state.update(torch.load(best_path, weights_only=False)["state"])

        t_start = time.monotonic()
        stop: dict[str, Any] = {"by": "steps", "train_s": None}  # this run's own, never resumed from best_path

        def evaluate(step: int, m: dict[str, float]) -> None:
            loss = heldout_loss(learner, held, c.batch_size)
            m["heldout_loss"] = loss
            if loss < state["best"] - c.min_delta:
                state.update(best=loss, best_step=step, bad=0)
                weights = {k: v.detach().to("cpu", copy=True) for k, v in actor.module.state_dict().items()}
                torch.save({"state": dict(state), "weights": weights}, best_path)
            else:
                state["bad"] += 1
            m["heldout_best"] = state["best"]

        def step_fn(step: int) -> dict[str, float]:
            set_lr(actor, lr_at(step, total, c.lr, c.warmup_steps, c.min_lr_ratio))
            idx = minibatch_indices(len(train), c.batch_size, step, base_seed)
            m = learner.sft_step(collate([train[i] for i in idx]), c.aggregation)
            m["lr"] = lr_at(step, total, c.lr, c.warmup_steps, c.min_lr_ratio)
            m["epoch"] = step / per_epoch
            # read the clock once a step: the step that runs out of time is the one whose held-out loss is measured
            if c.max_train_s is not None and time.monotonic() - t_start >= c.max_train_s:
                stop["by"] = "time"
            if held and (step % c.eval_every == 0 or step == total or stop["by"] == "time"):
                evaluate(step, m)
            return m

        def stop_fn(step: int, m: dict[str, float]) -> bool:
            if stop["by"] == "steps" and held and state["bad"] >= c.patience:
                stop["by"] = "patience"
            return stop["by"] != "steps"

        last_step, last = rt.run_steps(total, {"actor": actor}, step_fn, checkpoint_every=c.checkpoint_every,
                                       stop_fn=stop_fn)
        stop["train_s"] = round(time.monotonic() - t_start, 1)
        if best_path.exists():
            actor.module.load_state_dict(torch.load(best_path, weights_only=False)["weights"])
        exported = export_actor_hf(actor, rt.dir / "actor", rt.tokenizer_dir)
        if c.eval_tasks:
            summary = self.heldout(rt, exported)
            rt.log(last_step, summary)
            last = {**last, **summary}
        outputs: dict[str, Any] = {"actor": str(exported),
                                   "steps": last_step, "planned_steps": total, "episodes": len(train),
                                   "best_heldout_loss": None if math.isinf(state["best"]) else state["best"],
                                   "best_step": state["best_step"], "stopped_by": stop["by"],
                                   "train_s": stop["train_s"], "metrics": last}
        if rt.ctx.inputs.get("critic"):
            outputs["critic"] = rt.ctx.inputs["critic"]
        return outputs

    def heldout(self, rt: StageRuntime, actor_dir: Path) -> dict[str, float]:
        """Evaluate the actor in ``actor_dir`` on ``eval_tasks`` (``<stage>/heldout/final.jsonl``)."""
        from cuda_agent.training.stages.episodes import make_source
        from cuda_agent.training.stages.heldout import run_heldout

        c: SFTStageConfig = self.config
        source = make_source(rt, "kernel", mode="agent", tasks=c.eval_tasks, max_new_tokens=c.max_new_tokens,
                             temperature=c.temperature, rollout=c.rollout)
        return run_heldout(source, actor_dir, c.eval_tasks, rt.dir / "heldout", "final", repeats=c.eval_repeats,
                           seed=stable_seed(rt.config.seed, "heldout", "sft"))

    def evaluate_only(self, rt: StageRuntime) -> dict[str, Any]:
        """``train: false``: the held-out evaluation of the actor the stage starts from, unchanged."""
        c: SFTStageConfig = self.config
        source = rt.actor_source
        if not isinstance(source, str) or not (Path(source) / "config.json").exists():
            raise ConfigError(f"sft with train: false evaluates an HF model folder; got {source!r}")
        if not c.eval_tasks:
            raise ConfigError("sft with train: false needs 'eval_tasks' (there is nothing else to do)")
        summary = self.heldout(rt, Path(source))
        rt.log(0, summary)
        return {"actor": source, "steps": 0, "planned_steps": 0, "episodes": 0, "best_heldout_loss": None,
                "best_step": 0, "stopped_by": "no_training", "train_s": 0.0, "metrics": summary}
