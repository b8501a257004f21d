"""How far one PPO update moves a policy, per actor learning rate: pick ``actor_lr`` before spending device time.

    # the learning curve's carried SFT actor of seed 0 and its family's expert episodes (on CPU, ~4 min per rate)
    python benchmarks/ppo_trust_region.py --state .learning_state --seed 0 --lr 1e-4,2e-5,1e-5 --out trust.json
    # step 1's own rollouts, brought back by learning_curve.py --phase rl_step, on the SFT actor that sampled them
    python benchmarks/ppo_trust_region.py --state .learning_state --seed 0 --episodes rollouts_seed0_step1.pt \
        --keep-rewards --lr 2e-5,1e-5 --out trust.json
    # any HF actor and an episode file
    python benchmarks/ppo_trust_region.py --actor DIR --episodes episodes.pt --lr 1e-5,3e-6 --out trust.json
    # step 2 as it ran (group baseline, target_kl), on the step-1 actor that sampled it, probed on other seeds' rollouts
    python benchmarks/ppo_trust_region.py --state .learning_state --seed 2 --actor-state step1_actor_seed2.safetensors \
        --episodes rollouts_seed2_step2.pt --keep-rewards --baseline group --target-kl 0.02 --lr 2e-5 \
        --probe rollouts_seed0_step2.pt,rollouts_seed1_step2.pt --out trust.json

For each rate the same actor takes one PPO update (``--epochs`` x ``--minibatches`` optimizer steps, the
learning curve's PPO settings without its critic) on the same batch. The advantages (``--baseline``) are the
whitened returns (``whitened``) or, as the PPO stage's ``baseline: group`` makes them, each episode's return minus
the mean return of the other samples of its task (leave-one-out over ``meta['group']``), then whitened
(``group``). ``--target-kl`` is the PPO settings' ``target_kl``: the update ends at the first minibatch whose k3
mean passes it (that minibatch is not stepped); the report says how many minibatches stepped. All of it runs
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
step does at the same rate. The rollout log-probs are the actor's own either way (on-policy). With
``--baseline group`` the batch is made of whole groups (consecutive episodes of one ``meta['group']``) in the
file's order, as the stage collates them (``--n`` a whole number of groups).

``--probe`` names rollout files of other seeds: episodes of the same task family that the update never saw. Each
is scored by the actor before and after the update (teacher-forced, :meth:`Learner.score`) and reported
(:func:`probe_report`): over failing episodes, the tokens of the first policy turn that the actor gave p < 0.1
(wrong op names, syntax slips sampled at temperature 1; passing first turns hold none), their mean log-prob change
and the share that fell; over passing episodes, the mean change of the first turn's summed log-prob; the same two
over all policy tokens; and what happened to the confident tokens (p >= 0.9). An update that lowers those tail
tokens and raises passing first turns on unseen episodes is one that should raise the held-out pass rate.

``--actor-state FILE`` with ``--state``: the actor is that bf16 state file (e.g. a step's actor) over the seed's
model folder, instead of the carried SFT actor.

``--moments FILE`` starts the actor's AdamW from a carried moments file (``rl_actor_moments_seed<s>.safetensors``, the
one that belongs to ``--actor-state``), and the warm-up from its ``actor_steps`` (``--actor-steps N`` overrides it),
so the update is the one the device run took. ``--max-kl`` is the PPO settings' ``max_kl`` (training/trust_region.py):
after every optimizer step the whole batch's k3 is measured (``batch_kl_k3`` per minibatch), and the step that takes
it past the limit is taken back and ends the update; the report's ``trust`` holds the step's trust-region metrics
and ``after`` describes the policy the update kept. A step of the learning curve replayed with and without it:

    python benchmarks/ppo_trust_region.py --state .learning_state --seed 1 --actor-state step3_actor_seed1.safetensors \
        --moments rl_actor_moments_seed1.safetensors --episodes rollouts_seed1_step4.pt --keep-rewards --n 96 \
        --baseline group --negative-scale 0 --epochs 1 --minibatches 6 --warmup 4 --target-kl 0.02 --lr 1e-4 \
        --max-kl 0.1 --out trust_seed1.json
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


def read_rows(episodes_file: Path) -> list[dict[str, Any]]:
    """The episode dicts of a torch file (the PPO stage's ``save_rollouts`` layout, or an expert corpus)."""
    rows = torch.load(episodes_file, weights_only=False)
    if not isinstance(rows, list) or not rows or not {"token_ids", "loss_mask", "reward"} <= set(rows[0]):
        raise SystemExit(f"{episodes_file}: expected a torch list of dicts with token_ids, loss_mask and reward")
    return rows


def group_runs(rows: list[dict[str, Any]], source: Path) -> list[list[int]]:
    """Indices of each run of consecutive episodes sharing ``meta['group']`` (one task's samples), in file order."""
    runs: list[list[int]] = []
    last = None
    for i, r in enumerate(rows):
        g = (r.get("meta") or {}).get("group")
        if g is None:
            raise SystemExit(f"{source}: episode {i} has no meta['group']; --baseline group needs a grouped step's "
                             "rollouts (samples_per_task > 1)")
        if not runs or g != last:
            runs.append([])
        runs[-1].append(i)
        last = g
    return runs


def to_episode(r: dict[str, Any], reward: float, success: bool, group: bool = True) -> Any:
    """An :class:`Episode` of one episode dict with ``reward`` (no log-probs); its ``meta['group']`` kept unless
    ``group`` is False."""
    from cuda_agent.training.buffers import Episode

    ids = [int(x) for x in r["token_ids"]]
    meta = {"group": int(r["meta"]["group"])} if group and "group" in (r.get("meta") or {}) else {}
    return Episode(token_ids=ids, loss_mask=[int(x) for x in r["loss_mask"]], logprobs=[0.0] * len(ids),
                   reward=reward, success=success, meta=meta)


def load_batch(episodes_file: Path, n: int, pass_share: float, seed: int, keep_rewards: bool = False,
               grouped: bool = False) -> Any:
    """``n`` episodes of the file (seeded draw): all keeping their reward (``keep_rewards``), else ``pass_share`` of
    them keeping it and the rest -1. ``grouped``: whole groups (drawn, then in file order, as the stage collates
    them), each episode with its ``meta['group']``, and the kept rewards a seeded draw over the batch."""
    from cuda_agent.training.buffers import collate

    rows = read_rows(episodes_file)
    if n > len(rows):
        raise SystemExit(f"--n {n}: {episodes_file} holds {len(rows)} episodes")
    rng = random.Random(seed)
    if grouped:
        runs = group_runs(rows, episodes_file)
        chosen_runs: list[list[int]] = []
        for run in rng.sample(runs, len(runs)):
            if sum(map(len, chosen_runs)) < n:
                chosen_runs.append(run)
        if sum(map(len, chosen_runs)) != n:
            raise SystemExit(f"--n {n} is not a whole number of {episodes_file}'s groups")
        chosen = [rows[i] for run in sorted(chosen_runs) for i in run]
    else:
        chosen = rng.sample(rows, n)
    keep = n if keep_rewards else round(n * pass_share)
    kept = set(range(n)) if keep_rewards else set(rng.sample(range(n), keep)) if grouped else set(range(keep))
    eps = [to_episode(r, float(r["reward"]) if i in kept else -1.0,
                      bool(r.get("success", i in kept)) if keep_rewards else i in kept)
           for i, r in enumerate(chosen)]
    return collate(eps)


def load_probe(files: list[Path]) -> Any:
    """Every episode of the probe files in one batch, rewards and success as recorded (no groups: those of two
    files collide, and the probe needs none)."""
    from cuda_agent.training.buffers import collate

    return collate([to_episode(r, float(r["reward"]), bool(r.get("success", float(r["reward"]) > 0)), group=False)
                    for f in files for r in read_rows(f)])


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


def first_turn(mask: torch.Tensor) -> torch.Tensor:
    """Per row, the positions of the first contiguous run of policy tokens (the first turn), as a bool mask."""
    m = mask > 0
    started = m.cumsum(-1) > 0
    after_gap = (started & ~m).cumsum(-1) > 0
    return m & ~after_gap


def tail_change(d: torch.Tensor, p: torch.Tensor, sel: torch.Tensor, low: float) -> dict[str, Any]:
    """Over the selected tokens with ``p < low`` before the update: how many (and in how many rows), their mean
    log-prob change and the share of them whose probability fell."""
    t = sel & (p < low)
    x = d[t]
    return {"tokens": int(t.sum()), "episodes_with": int(t.any(-1).sum()), "episodes": int(sel.any(-1).sum()),
            "mean_dlogp": float(x.mean()) if x.numel() else None,
            "share_fell": float((x < 0).float().mean()) if x.numel() else None}


def summed_change(d: torch.Tensor, sel: torch.Tensor) -> dict[str, Any]:
    """Over the rows with a selected token: mean change of each row's summed log-prob over its selected tokens,
    and the mean change per token."""
    rows = sel.any(-1)
    per_row = (d * sel).sum(-1)[rows]
    return {"episodes": int(rows.sum()), "mean_dsum_logp": float(per_row.mean()) if rows.any() else None,
            "mean_dlogp_per_token": float(d[sel].mean()) if sel.any() else None,
            "share_rose": float((per_row > 0).float().mean()) if rows.any() else None}


def probe_report(old: torch.Tensor, new: torch.Tensor, batch: Any, low: float = 0.1) -> dict[str, Any]:
    """What one update did to episodes it never saw (log-probs ``old``/``new`` of ``batch``, action layout):
    ``first_turn`` and ``all_tokens`` each hold ``failing_tail`` (failing episodes, reward -1: tokens the actor gave
    p < ``low`` before, see :func:`tail_change`) and ``passing`` (successful episodes: :func:`summed_change`);
    ``confident``: every policy token with p >= 0.9 before (mean change, falls over 2 and 5 nats)."""
    m = batch.mask > 0
    d = (new - old).masked_fill(~m, 0.0)
    p = old.exp()
    fail = (batch.rewards == -1.0)[:, None]
    ok = batch.success.bool()[:, None]
    ft = first_turn(batch.mask)
    conf = m & (p >= 0.9)
    return {"episodes": batch.size, "failing": int(fail.sum()), "passing": int(ok.sum()), "low_p": low,
            **{name: {"failing_tail": tail_change(d, p, region & fail, low), "passing": summed_change(d, region & ok)}
               for name, region in (("first_turn", ft), ("all_tokens", m))},
            "confident": {"tokens": int(conf.sum()), "mean_dlogp": float(d[conf].mean()) if conf.any() else None,
                          **{f"fell_over_{int(t)}_nats": int((d[conf] < -t).sum()) for t in FALLS}}}


def probe_line(r: dict[str, Any]) -> str:
    """One printable line of a :func:`probe_report`."""
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:+.4f}" if isinstance(x, float) else str(x)
    a, b = r["first_turn"]["failing_tail"], r["first_turn"]["passing"]
    c, e = r["all_tokens"]["failing_tail"], r["all_tokens"]["passing"]
    return (f"probe {r['episodes']} eps: first turn: failing p<{r['low_p']} {a['tokens']} tok in "
            f"{a['episodes_with']}/{a['episodes']} eps dlogp {f(a['mean_dlogp'])} fell {f(a['share_fell'])} | "
            f"passing dsum {f(b['mean_dsum_logp'])} | all: failing tail {c['tokens']} tok dlogp {f(c['mean_dlogp'])} "
            f"fell {f(c['share_fell'])} | passing dsum {f(e['mean_dsum_logp'])} | confident >2 nats "
            f"{r['confident']['fell_over_2_nats']}")


def advantage_summary(learner: Any, batch: Any, old: torch.Tensor, s: Any) -> dict[str, Any]:
    """The trainer's own advantages of the batch (:meth:`Learner.advantages`): each episode's at its first policy
    token, with its reward and group."""
    adv, _, _ = learner.advantages(batch, {"old_logp": old}, s)
    first = (batch.mask > 0).float().argmax(-1)
    at = adv.gather(1, first[:, None])[:, 0]
    return {"baseline": s.baseline, "per_episode": [
        {"group": None if batch.groups is None else int(batch.groups[b]), "reward": float(batch.rewards[b]),
         "advantage": round(float(at[b]), 5)} for b in range(batch.size)]}


def one_rate(actor_dir: Path, batch: Any, lr: float, args: argparse.Namespace, probe: Any = None) -> dict[str, Any]:
    """One PPO update of a fresh engine at ``lr`` (its AdamW from ``--moments`` where given): per-minibatch metrics,
    the distribution after it, and (``probe``: a batch of unseen episodes) :func:`probe_report` of it."""
    from cuda_agent.training.engines.deepspeed_engine import build_train_engine
    from cuda_agent.training.engines.models import load_causal_lm
    from cuda_agent.training.engines.moments import load_moments
    from cuda_agent.training.ppo_update import Learner, linear_warmup
    from cuda_agent.training.settings import EngineSettings, PPOSettings

    torch.manual_seed(0)
    engine = build_train_engine(load_causal_lm(actor_dir), lr, EngineSettings(zero_stage=0, dtype="fp32"))
    learner = Learner(engine)
    if args.moments is not None:
        meta = load_moments(engine, args.moments)
        learner.actor_steps = int(meta.get("actor_steps", 0))
    if args.actor_steps is not None:
        learner.actor_steps = args.actor_steps
    actor_steps_start = learner.actor_steps
    if args.warmup:
        learner.actor_lr_at = linear_warmup(lr, args.warmup)
    s = PPOSettings(ppo_epochs=args.epochs, minibatches=args.minibatches, gamma=1.0, lam=1.0, kl_coef=0.0,
                    entropy_coef=0.0, aggregation=args.aggregation, use_critic=False,
                    baseline="group" if args.baseline == "group" else "critic", target_kl=args.target_kl,
                    max_kl=args.max_kl, negative_scale=args.negative_scale)
    parts = max(1, min(s.minibatches, batch.size))
    probe_parts = max(1, probe.size // 4) if probe is not None else 1
    with torch.no_grad():
        probe_old = learner.score(probe, probe_parts)["old_logp"] if probe is not None else None
        old = learner.score(batch, parts)["old_logp"]
    batch.rollout_logp = old.clone()  # on-policy: the actor's own log-probs
    advantages = advantage_summary(learner, batch, old, s)
    t0 = time.perf_counter()
    step = learner.ppo_step(batch, s)  # the trainer's own update
    rows = []
    for i, m in enumerate(learner.last_minibatches):
        rows.append({"epoch": i // parts, "minibatch": i % parts, "stepped": not m.get("kl_stopped"),
                     "taken_back": bool(m.get("trust_rolled_back")),
                     **{k: m[k] for k in ("approx_kl", "clip_frac", "collapsed_frac", "log_ratio_min", "entropy",
                                          "batch_kl_k3", "batch_kl_k1", "batch_max_drop") if k in m}})
        batch_k3 = f" | batch k3 after {m['batch_kl_k3']:.3g} worst fall {m['batch_max_drop']:.2f}" if "batch_kl_k3" in m else ""
        print(f"  lr {lr:g} epoch {i // parts} minibatch {i % parts}: approx_kl {m['approx_kl']:.3g} "
              f"clip {m['clip_frac']:.4f} collapsed {m['collapsed_frac']:.5f} "
              f"min log-ratio {m['log_ratio_min']:.2f}{batch_k3}{' -> target_kl: stopped' if m.get('kl_stopped') else ''}"
              f"{' -> max_kl: taken back' if m.get('trust_rolled_back') else ''}", flush=True)
    update_s = time.perf_counter() - t0
    with torch.no_grad():
        new = learner.score(batch, parts)["old_logp"]
        out = {"lr": lr, "warmup_steps": args.warmup, "target_kl": args.target_kl, "max_kl": args.max_kl,
               "moments": str(args.moments) if args.moments else None, "actor_steps_start": actor_steps_start,
               "actor_steps_end": learner.actor_steps,
               "trust": {k: v for k, v in step.items() if k.startswith("trust_")}, "update_s": round(update_s, 1),
               "minibatches_stepped": int(step["update_minibatches"]),
               "minibatches_planned": s.ppo_epochs * parts, "kl_stopped": bool(step["kl_stopped"]),
               "minibatches": rows, "after": after_update(old, new, batch.mask), "advantages": advantages}
        if probe is not None:
            out["probe"] = probe_report(probe_old, learner.score(probe, probe_parts)["old_logp"], probe)
            print("  " + probe_line(out["probe"]), flush=True)
    return out


def trust_note(trust: dict[str, float]) -> str:
    """The summary line's words on ``--max-kl`` (empty without it)."""
    if not trust:
        return ""
    back = (f"the next step taken back (batch k3 {trust['trust_rejected_kl_k3']:.3g}, worst fall "
            f"{trust['trust_rejected_max_drop']:.2f} nats)" if trust["trust_rolled_back"] else "none taken back")
    return f" (max_kl: {int(trust['trust_minibatches_kept'])} kept, {back})"


def from_state(state: Path, seed: int, work: Path, actor_state: Path | None = None,
               experts: bool = True) -> tuple[Path, Path]:
    """The learning curve's carried SFT actor of ``seed`` (or the bf16 state file ``actor_state``, e.g. a step's
    actor, over the seed's model folder) and its family's expert episodes (built only with ``experts``), rebuilt
    in ``work``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    from cuda_agent.training.kernel_family.corpus import ModelSize, build_model

    p = dict(lc.PRESETS["h200"])
    data = work / "data"
    lc.ensure_family_data(data, p, ["sft"] if experts else ["rl_step"], state / "data_core.tar.gz",
                          work / "carried_data")
    model = work / f"model_seed{seed}"
    if not (model / "config.json").exists():
        build_model(model, data / "tokenizer", ModelSize(**p["model"]), seed=seed)
    src = actor_state or state / f"state_seed{seed}.safetensors"
    if not src.exists():
        raise SystemExit(f"{src} does not exist: --state must hold the SFT actors (state_seed*.safetensors), "
                         "--actor-state an actor's state file")
    dest = work / (f"actor_{src.stem}" if actor_state else f"actor_seed{seed}")
    actor = lc.load_state(src, model, dest, lc.tokenizer_hash(data))
    return actor, data / "expert_train.pt"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actor", type=Path, help="HF actor folder (or --state)")
    ap.add_argument("--episodes", type=Path, help="torch list of episode dicts (with --state: instead of its experts)")
    ap.add_argument("--state", type=Path, help="the learning curve's state folder: its SFT actor and expert episodes")
    ap.add_argument("--seed", type=int, default=0, help="with --state: whose SFT actor")
    ap.add_argument("--actor-state", type=Path, help="with --state: this bf16 actor state file instead of the SFT actor")
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
    ap.add_argument("--baseline", choices=("whitened", "group"), default="whitened",
                    help="advantages: whitened returns, or the PPO stage's group baseline (leave-one-out over "
                         "meta['group'], then whitened)")
    ap.add_argument("--target-kl", type=float, default=None,
                    help="the PPO settings' target_kl: stop the update at the first minibatch whose k3 mean passes it")
    ap.add_argument("--max-kl", type=float, default=None,
                    help="the PPO settings' max_kl: take back the optimizer step that takes the whole batch's k3 past it")
    ap.add_argument("--negative-scale", type=float, default=1.0,
                    help="the PPO settings' negative_scale (weight of negative advantages; the h200 preset's is 0)")
    ap.add_argument("--moments", type=Path, default=None,
                    help="an Adam moments file (a PPO run's actor_moments) the actor's AdamW starts from")
    ap.add_argument("--actor-steps", type=int, default=None,
                    help="the warm-up position the update starts at (default: the --moments file's actor_steps, else 0)")
    ap.add_argument("--probe", default="", help="comma list of rollout files of other seeds, scored before and "
                                                "after the update (see probe_report)")
    ap.add_argument("--out", type=Path, required=True, help="JSON results")
    args = ap.parse_args(argv)
    if args.actor_state is not None and args.state is None:
        raise SystemExit("--actor-state needs --state (its data core and the seed's model folder)")
    if args.target_kl is not None and args.target_kl <= 0:
        raise SystemExit(f"--target-kl {args.target_kl}: give a positive k3 bound, or leave it out")
    if args.max_kl is not None and args.max_kl <= 0:
        raise SystemExit(f"--max-kl {args.max_kl}: give a positive whole-batch k3 bound, or leave it out")
    if args.moments is not None and not args.moments.is_file():
        raise SystemExit(f"--moments {args.moments}: no such file (a PPO run's actor_moments safetensors file)")
    if args.actor_steps is not None and args.actor_steps < 0:
        raise SystemExit(f"--actor-steps {args.actor_steps}: give the optimizer steps already taken (>= 0)")
    if args.state is not None:  # its SFT actor (or --actor-state), and its expert episodes unless --episodes
        actor, experts = from_state(args.state, args.seed, args.work, args.actor_state, experts=args.episodes is None)
        episodes = args.episodes or experts
    elif args.actor is not None and args.episodes is not None:
        actor, episodes = args.actor, args.episodes
    else:
        raise SystemExit("give --state (and --seed), or both --actor and --episodes")
    rates = [float(x) for x in args.lr.split(",") if x.strip()]
    if not rates or any(r <= 0 for r in rates):
        raise SystemExit(f"--lr {args.lr!r}: give positive learning rates, e.g. 1e-4,2e-5")
    probe_files = [Path(x) for x in args.probe.split(",") if x.strip()]
    probe = load_probe(probe_files) if probe_files else None
    results = []
    for lr in rates:
        batch = load_batch(episodes, args.n, args.pass_share, args.draw_seed, args.keep_rewards,
                           grouped=args.baseline == "group")
        r = one_rate(actor, batch, lr, args, probe)
        a = r["after"]
        print(f"lr {lr:g}: {r['minibatches_stepped']}/{r['minibatches_planned']} minibatches{trust_note(r['trust'])} | "
              f"k1 {a['k1_mean']:.2g} "
              f"k3 {a['k3_mean']:.3g} | fell >2 nats {a['fell_over_2_nats']} >5 {a['fell_over_5_nats']} of "
              f"{a['policy_tokens']} | min log-ratio {a['log_ratio_min']:.2f} | update {r['update_s']} s", flush=True)
        results.append(r)
    out = {"actor": str(actor), "episodes": str(episodes), "n": args.n,
           "pass_share": None if args.keep_rewards else args.pass_share, "keep_rewards": args.keep_rewards,
           "baseline": args.baseline, "target_kl": args.target_kl, "max_kl": args.max_kl,
           "negative_scale": args.negative_scale, "moments": str(args.moments) if args.moments else None,
           "probe": [str(f) for f in probe_files],
           "epochs": args.epochs, "minibatches": args.minibatches, "aggregation": args.aggregation, "rates": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
