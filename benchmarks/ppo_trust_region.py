"""How far one PPO update moves a policy, per actor learning rate: pick ``actor_lr`` before spending device time.

    # the learning curve's carried SFT actor of seed 0 and its family's expert episodes (on CPU, ~4 min per rate)
    python benchmarks/ppo_trust_region.py --state .learning_state --seed 0 --lr 1e-4,2e-5,1e-5 --out trust.json
    # step 1's own rollouts, brought back by learning_curve.py --phase rl_step, on the SFT actor that sampled them
    python benchmarks/ppo_trust_region.py --state .learning_state --seed 0 --episodes rollouts_seed0_step1.pt \
        --keep-rewards --lr 2e-5,1e-5 --out trust.json
    # any HF actor and an episode file
    python benchmarks/ppo_trust_region.py --actor DIR --episodes episodes.pt --lr 1e-5,3e-6 --out trust.json

For each rate the same actor takes one PPO update (``--epochs`` x ``--minibatches`` optimizer steps, the
learning curve's PPO settings without its critic: the advantages are the whitened returns) on the same batch,
through the trainer's own :meth:`~cuda_agent.training.ppo_update.Learner.ppo_step` on a real DeepSpeed engine in
fp32. Reported per minibatch: ``approx_kl`` (k3 mean), ``clip_frac``,
``collapsed_frac``, ``log_ratio_min``; and after the update, over every policy token of the batch: the mean k1
and k3, quantiles of ``|log ratio|``, how many tokens fell by more than 2 and 5 nats, and the worst tokens'
probabilities before and after. A token that fell from p=0.99 to 1e-5 is a decision the policy made with
confidence and now rarely makes; in generated code, often one that breaks the build.

The batch is ``--n`` episodes of an episode file (a torch list of dicts with ``token_ids``, ``loss_mask`` and
``reward``). With ``--keep-rewards`` they keep their rewards: a real step's rollouts, which ``learning_curve.py
--phase rl_step`` brings back as ``rollouts_seed<s>_step<k>.pt`` (replay them on the actor that sampled them: the
SFT actor for step 1). Otherwise the batch stands in for a step's: e.g. the kernel family's ``expert_train.pt``
(what ``--state`` uses), of which the first ``--pass-share`` keep their reward and the rest get -1, so the
advantages have a step's mix of signs. Expert episodes are near the SFT policy's greedy choices; the policy's own
samples at temperature 1 hold more low-probability tokens, so read those figures as a lower bound of what a real
step does at the same rate. The rollout log-probs are the actor's own either way (on-policy).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]

#: Log-ratio thresholds (nats) counted after the update.
FALLS = (2.0, 5.0)


def load_batch(episodes_file: Path, n: int, pass_share: float, seed: int, keep_rewards: bool = False) -> Any:
    """``n`` episodes of the file (seeded draw): all keeping their reward (``keep_rewards``), else the first
    ``pass_share`` keeping it and the rest -1."""
    from cuda_agent.training.buffers import Episode, collate

    rows = torch.load(episodes_file, weights_only=False)
    if not isinstance(rows, list) or not rows or not {"token_ids", "loss_mask", "reward"} <= set(rows[0]):
        raise SystemExit(f"{episodes_file}: expected a torch list of dicts with token_ids, loss_mask and reward")
    if n > len(rows):
        raise SystemExit(f"--n {n}: {episodes_file} holds {len(rows)} episodes")
    chosen = random.Random(seed).sample(rows, n)
    keep = n if keep_rewards else round(n * pass_share)
    eps = []
    for i, r in enumerate(chosen):
        ids = [int(x) for x in r["token_ids"]]
        eps.append(Episode(token_ids=ids, loss_mask=[int(x) for x in r["loss_mask"]], logprobs=[0.0] * len(ids),
                           reward=float(r["reward"]) if i < keep else -1.0, success=i < keep))
    return collate(eps)


def after_update(old: torch.Tensor, new: torch.Tensor, mask: torch.Tensor, worst: int = 10) -> dict[str, Any]:
    """Distribution of the per-token log-ratio ``new - old`` over the policy tokens."""
    from cuda_agent.training.algorithms import kl_estimate

    sel = mask > 0
    x = (new - old)[sel]
    po = old.exp()[sel]
    k3 = kl_estimate(new, old, "k3")[sel]
    order = x.argsort()[:worst]
    return {
        "policy_tokens": int(sel.sum()),
        "k1_mean": float((-x).mean()),
        "k3_mean": float(k3.mean()),
        "abs_log_ratio_quantiles": dict(zip(("q50", "q90", "q99", "q999"),
                                            (float(q) for q in torch.quantile(x.abs().double(),
                                                                              torch.tensor([0.5, 0.9, 0.99, 0.999],
                                                                                           dtype=torch.float64))))),
        **{f"fell_over_{int(t)}_nats": int((x < -t).sum()) for t in FALLS},
        "log_ratio_min": float(x.min()),
        "worst_p_before": [round(float(v), 6) for v in po[order]],
        "worst_p_after": [float(f"{float(v):.3g}") for v in (po * x.exp())[order]],
    }


def one_rate(actor_dir: Path, batch: Any, lr: float, args: argparse.Namespace) -> dict[str, Any]:
    """One PPO update of a fresh engine at ``lr``: per-minibatch metrics and the distribution after it."""
    from cuda_agent.training.engines.deepspeed_engine import build_train_engine
    from cuda_agent.training.engines.models import load_causal_lm
    from cuda_agent.training.ppo_update import Learner, linear_warmup
    from cuda_agent.training.settings import EngineSettings, PPOSettings

    torch.manual_seed(0)
    engine = build_train_engine(load_causal_lm(actor_dir), lr, EngineSettings(zero_stage=0, dtype="fp32"))
    learner = Learner(engine)
    if args.warmup:
        learner.actor_lr_at = linear_warmup(lr, args.warmup)
    s = PPOSettings(ppo_epochs=args.epochs, minibatches=args.minibatches, gamma=1.0, lam=1.0, kl_coef=0.0,
                    entropy_coef=0.0, aggregation=args.aggregation, use_critic=False)
    parts = max(1, min(s.minibatches, batch.size))
    old = learner.score(batch, parts)["old_logp"]
    batch.rollout_logp = old.clone()  # on-policy: the actor's own log-probs
    t0 = time.perf_counter()
    learner.ppo_step(batch, s)  # the trainer's own update
    rows = []
    for i, m in enumerate(learner.last_minibatches):
        rows.append({"epoch": i // parts, "minibatch": i % parts,
                     **{k: m[k] for k in ("approx_kl", "clip_frac", "collapsed_frac", "log_ratio_min", "entropy")
                        if k in m}})
        print(f"  lr {lr:g} epoch {i // parts} minibatch {i % parts}: approx_kl {m['approx_kl']:.3g} "
              f"clip {m['clip_frac']:.4f} collapsed {m['collapsed_frac']:.5f} "
              f"min log-ratio {m['log_ratio_min']:.2f}", flush=True)
    update_s = time.perf_counter() - t0
    with torch.no_grad():
        new = learner.score(batch, parts)["old_logp"]
    return {"lr": lr, "warmup_steps": args.warmup, "update_s": round(update_s, 1), "minibatches": rows,
            "after": after_update(old, new, batch.mask)}


def from_state(state: Path, seed: int, work: Path) -> tuple[Path, Path]:
    """The learning curve's carried SFT actor of ``seed`` and its family's expert episodes, rebuilt in ``work``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    from cuda_agent.training.kernel_family.corpus import ModelSize, build_model

    p = dict(lc.PRESETS["h200"])
    data = work / "data"
    lc.ensure_family_data(data, p, ["sft"], state / "data_core.tar.gz", work / "carried_data")
    model = work / f"model_seed{seed}"
    if not (model / "config.json").exists():
        build_model(model, data / "tokenizer", ModelSize(**p["model"]), seed=seed)
    src = state / f"state_seed{seed}.safetensors"
    if not src.exists():
        raise SystemExit(f"{src} does not exist: --state must hold the SFT actors (state_seed*.safetensors)")
    actor = lc.load_state(src, model, work / f"actor_seed{seed}", lc.tokenizer_hash(data))
    return actor, data / "expert_train.pt"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actor", type=Path, help="HF actor folder (or --state)")
    ap.add_argument("--episodes", type=Path, help="torch list of episode dicts (with --state: instead of its experts)")
    ap.add_argument("--state", type=Path, help="the learning curve's state folder: its SFT actor and expert episodes")
    ap.add_argument("--seed", type=int, default=0, help="with --state: whose SFT actor")
    ap.add_argument("--work", type=Path, default=Path("/tmp/ppo_trust_region"), help="with --state: rebuild folder")
    ap.add_argument("--lr", default="1e-4,2e-5,1e-5", help="comma list of actor learning rates")
    ap.add_argument("--warmup", type=int, default=0, help="actor warm-up steps (the PPO stage's actor_warmup_steps)")
    ap.add_argument("--n", type=int, default=32, help="episodes in the batch (a step's episodes_per_step)")
    ap.add_argument("--pass-share", type=float, default=0.2, help="share of episodes keeping their reward")
    ap.add_argument("--keep-rewards", action="store_true",
                    help="every episode keeps its own reward (a real step's rollouts); --pass-share is then unused")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--minibatches", type=int, default=4)
    ap.add_argument("--aggregation", default="seq_mean_token_mean")
    ap.add_argument("--draw-seed", type=int, default=1, help="seed of the episode draw")
    ap.add_argument("--out", type=Path, required=True, help="JSON results")
    args = ap.parse_args(argv)
    if args.state is not None:  # its SFT actor, and its expert episodes unless --episodes names others
        actor, experts = from_state(args.state, args.seed, args.work)
        episodes = args.episodes or experts
    elif args.actor is not None and args.episodes is not None:
        actor, episodes = args.actor, args.episodes
    else:
        raise SystemExit("give --state (and --seed), or both --actor and --episodes")
    rates = [float(x) for x in args.lr.split(",") if x.strip()]
    if not rates or any(r <= 0 for r in rates):
        raise SystemExit(f"--lr {args.lr!r}: give positive learning rates, e.g. 1e-4,2e-5")
    results = []
    for lr in rates:
        batch = load_batch(episodes, args.n, args.pass_share, args.draw_seed, args.keep_rewards)
        r = one_rate(actor, batch, lr, args)
        a = r["after"]
        print(f"lr {lr:g}: k1 {a['k1_mean']:.2g} k3 {a['k3_mean']:.3g} | fell >2 nats {a['fell_over_2_nats']} "
              f">5 {a['fell_over_5_nats']} of {a['policy_tokens']} | min log-ratio {a['log_ratio_min']:.2f} "
              f"| update {r['update_s']} s", flush=True)
        results.append(r)
    out = {"actor": str(actor), "episodes": str(episodes), "n": args.n,
           "pass_share": None if args.keep_rewards else args.pass_share, "keep_rewards": args.keep_rewards,
           "epochs": args.epochs, "minibatches": args.minibatches, "aggregation": args.aggregation, "rates": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
