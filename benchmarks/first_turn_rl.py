"""Pick the PPO recipe without a GPU: on-policy PPO on the kernel family's first turn, scored offline, on the CPU.

    # seed 0's carried SFT actor, 6 steps of 16 training tasks x 4 samples at 5e-5 for one epoch, held-out every 3
    python benchmarks/first_turn_rl.py --state .learning_state --seed 0 --steps 6 --lr 5e-5 --epochs 1 \
        --eval-every 3 --out first_turn_rl.json
    # no update: the SFT actor's held-out first turns at another sampling temperature (how far sharpening could go)
    python benchmarks/first_turn_rl.py --state .learning_state --seed 0 --steps 0 --eval-temperature 0.7 --out t07.json

On the H200 nearly every passing episode of the learning curve passes with its first kernel, and nearly every failing
one wrote a first kernel with a low-probability token in it (session 28). So the learning curve's PPO has one thing
to learn: put less mass on those tokens, on tasks it never trained on. That can be studied here, many steps deep,
with the device nowhere in the loop:

- each step samples ``--tasks`` training tasks' first replies, ``--samples`` per task, from the actor being trained
  (its prompt is the family's own: the system prompt and the task, up to the first policy token);
- each reply's reward is +1 where it is ``first_turn_ok`` (:mod:`sft_first_turn`: it writes ``kernels/chain.cu``
  with the task's operator lines in order, and the file compiles under ``nvcc -c``), else -1: the milestone
  reward's sign, with the task's reference solution standing in for the device's verification;
- the trainer's own :meth:`~cuda_agent.training.ppo_update.Learner.ppo_step` updates the actor on them, with the
  PPO stage's group baseline (leave-one-out over each task's samples), on a real DeepSpeed engine in fp32;
- each step's tasks are ones no earlier step drew, so its rollout pass rate is already a measure on tasks no update
  has seen (SFT saw every training task's expert episodes; the held-out tasks none);
- every ``--eval-every`` steps (and before the first, and after the last) the held-out tasks' first replies are sampled ``--eval-repeats``
  times at ``--eval-temperature`` and scored the same way, with the share of replies holding a token the actor gave
  p < 0.1 (the tail that failing episodes carry).

A proxy for the recipe, not a result: the reward compares against the task's reference solution, which no policy
sees and the real environment replaces with running the kernel. Never a way to train the policy that the curve
reports. What it tells: whether a rate, batch size and epoch count move unseen tasks' first turns at all, and how
many steps that takes, before device time is spent on them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

#: A first-reply token the actor gave less than this probability counts as a tail token.
TAIL_P = 0.1


def first_prompts(episodes: list[dict[str, Any]]) -> list[tuple[list[int], list[str]]]:
    """Each task's first-turn prompt (token ids up to the first policy token) and operator chain, one per task
    (the first episode of each ``meta['task_id']``), in file order."""
    seen: set[str] = set()
    out: list[tuple[list[int], list[str]]] = []
    for e in episodes:
        meta = e.get("meta") or {}
        task = meta.get("task_id")
        if task in seen:
            continue
        seen.add(task)
        first = int(torch.as_tensor(e["loss_mask"]).nonzero()[0])
        out.append(([int(x) for x in e["token_ids"][:first]], list(meta["chain"])))
    return out


class Scorer:
    """``first_turn_ok`` of replies, with each distinct kernel compiled once (sharpened policies repeat them)."""

    def __init__(self, workers: int = 2) -> None:
        self.pool = ThreadPoolExecutor(workers)
        self.compiled: dict[str, bool | None] = {}

    def rows(self, texts: list[str], chains: list[list[str]], eos: list[bool], tokens: list[int]) -> list[dict[str, Any]]:
        import sft_first_turn as ft

        need: dict[str, str] = {}
        found: list[tuple[dict[str, Any], str | None]] = []
        for text, chain, e, n in zip(texts, chains, eos, tokens):
            row, cu = ft.read_reply(text, chain, e, n)
            key = hashlib.sha256(cu.encode()).hexdigest() if cu is not None and row["ops_equal"] else None
            if key is not None and key not in self.compiled:
                need[key] = cu
            found.append((row, key))
        for key, ok in zip(need, self.pool.map(ft.compiles, need.values())):
            self.compiled[key] = ok
        out = []
        for row, key in found:  # a kernel with the wrong operators fails whether it compiles or not
            row["compiles"] = self.compiled.get(key) if key is not None else None
            row["first_turn_ok"] = bool(row["compiles"]) and row["ops_equal"]
            out.append(row)
        return out


@torch.no_grad()
def sample(model: Any, prompts: list[list[int]], max_new: int, temperature: float, pad: int, eos_id: int,
           batch: int) -> list[dict[str, Any]]:
    """One reply per prompt (left-padded batches, KV cache): its token ids up to and including EOS, the text
    without it, whether it ended, and its lowest token probability under the sampling distribution."""
    model.eval()
    out_rows: list[dict[str, Any]] = []
    for start in range(0, len(prompts), batch):
        chunk = prompts[start:start + batch]
        width = max(len(x) for x in chunk)
        ids = torch.full((len(chunk), width), pad)
        attention = torch.zeros_like(ids)
        for i, x in enumerate(chunk):
            ids[i, width - len(x):] = torch.tensor(x)
            attention[i, width - len(x):] = 1
        gen = model.generate(ids, attention_mask=attention, max_new_tokens=max_new, do_sample=True,
                             temperature=temperature, top_p=1.0, top_k=0, pad_token_id=pad,
                             output_scores=True, return_dict_in_generate=True)
        seqs = gen.sequences[:, width:]
        logp = torch.stack([s.log_softmax(-1) for s in gen.scores], 1)  # the sampling distribution's
        tok_logp = logp.gather(-1, seqs[:, : logp.shape[1], None])[..., 0]
        for i in range(len(chunk)):
            toks = seqs[i].tolist()
            ended = eos_id in toks
            n = toks.index(eos_id) + 1 if ended else len(toks)
            out_rows.append({"ids": toks[:n], "eos": ended, "min_p": float(tok_logp[i, :n].min().exp())})
    return out_rows


def sample_scored(model: Any, tok: Any, scorer: Scorer, prompts: list[list[int]], chains: list[list[str]],
                  temperature: float, args: argparse.Namespace, pad: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One reply per prompt (:func:`sample`) and its :meth:`Scorer.rows` row."""
    got = sample(model, prompts, args.max_new_tokens, temperature, pad, tok.eos_token_id, args.batch)
    texts = [tok.decode([t for t in g["ids"] if t != tok.eos_token_id]) for g in got]
    return got, scorer.rows(texts, chains, [g["eos"] for g in got], [len(g["ids"]) for g in got])


def evaluate(model: Any, tok: Any, scorer: Scorer, heldout: list[tuple[list[int], list[str]]], args: argparse.Namespace,
             pad: int) -> dict[str, Any]:
    """The held-out first replies (``--eval-repeats`` per task at ``--eval-temperature``), scored."""
    prompts = [p for p, _ in heldout] * args.eval_repeats
    chains = [c for _, c in heldout] * args.eval_repeats
    t0 = time.perf_counter()
    got, rows = sample_scored(model, tok, scorer, prompts, chains, args.eval_temperature, args, pad)
    n = len(rows)
    out = {k: sum(1 for r in rows if r[k]) / n for k in ("parsed", "ops_equal", "first_turn_ok")}
    out["tail_share"] = sum(1 for g in got if g["min_p"] < TAIL_P) / n
    ok = [bool(r["first_turn_ok"]) for r in rows]
    out["tail_share_failing"] = (sum(1 for g, k in zip(got, ok) if not k and g["min_p"] < TAIL_P)
                                 / max(1, sum(1 for k in ok if not k)))
    out.update(replies=n, temperature=args.eval_temperature, seconds=round(time.perf_counter() - t0, 1),
               per_task_ok=[sum(ok[i::len(heldout)]) for i in range(len(heldout))])
    return out


def rollout_batch(model: Any, tok: Any, scorer: Scorer, tasks: list[tuple[list[int], list[str]]],
                  args: argparse.Namespace, pad: int) -> tuple[Any, dict[str, Any]]:
    """``--samples`` first replies of each task, scored and collated as the PPO stage's grouped episodes."""
    from cuda_agent.training.buffers import Episode, collate

    prompts = [p for p, _ in tasks for _ in range(args.samples)]
    chains = [c for _, c in tasks for _ in range(args.samples)]
    got, rows = sample_scored(model, tok, scorer, prompts, chains, args.temperature, args, pad)
    eps = []
    for i, (p, g, r) in enumerate(zip(prompts, got, rows)):
        ids = p + g["ids"]
        ok = bool(r["first_turn_ok"])
        eps.append(Episode(token_ids=ids, loss_mask=[0] * len(p) + [1] * len(g["ids"]), logprobs=[0.0] * len(ids),
                           reward=1.0 if ok else -1.0, success=ok, meta={"group": i // args.samples}))
    oks = [bool(r["first_turn_ok"]) for r in rows]
    groups = [oks[i:i + args.samples] for i in range(0, len(oks), args.samples)]
    return collate(eps, pad_id=pad), {"pass_rate": sum(oks) / len(oks),
                                      "mixed_groups": sum(1 for g in groups if 0 < sum(g) < len(g)),
                                      "tail_share": sum(1 for g in got if g["min_p"] < TAIL_P) / len(got)}


def reset_optimizer(learner: Any) -> None:
    """Adam's moments dropped (built again at the next step) and the rate warm-up started again: what a device
    step, a run of its own from the carried actor, begins with. (A second DeepSpeed engine over the same module
    is not that: its first update moved the proxy's policy by approx_kl 21, session 31.)"""
    optimizer = learner.actor.optimizer
    getattr(optimizer, "optimizer", optimizer).state.clear()
    learner.actor_steps = 0


def carry_through_file(learner: Any, path: Path) -> None:
    """Adam's moments saved to a file and loaded back into a cleared optimizer, with the optimizer-step count: what
    a device step does since session 32 (``save_actor_moments`` / ``init_actor_moments``, ~2 bytes a weight)."""
    from cuda_agent.training.engines.moments import load_moments, save_moments

    save_moments(learner.actor, path, {"actor_steps": str(learner.actor_steps)})
    reset_optimizer(learner)
    learner.actor_steps = int(load_moments(learner.actor, path)["actor_steps"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--state", type=Path, required=True, help="the learning curve's state folder (data core, actors)")
    ap.add_argument("--seed", type=int, default=0, help="whose SFT actor (and the seed of the task draws)")
    ap.add_argument("--actor-state", type=Path, help="this bf16 actor state file instead of the SFT actor")
    ap.add_argument("--work", type=Path, default=Path("/tmp/first_turn_rl"), help="rebuild folder")
    ap.add_argument("--steps", type=int, default=6, help="PPO steps (0: evaluate only)")
    ap.add_argument("--tasks", type=int, default=16, help="training tasks per step")
    ap.add_argument("--samples", type=int, default=4, help="samples per task (the group of the baseline)")
    ap.add_argument("--lr", type=float, default=5e-5, help="actor learning rate")
    ap.add_argument("--warmup", type=int, default=0,
                    help="optimizer steps of linear rate warm-up (the PPO stage's actor_warmup_steps); the first steps "
                         "of a fresh Adam move every weight by about the full rate, whatever its gradient's noise")
    ap.add_argument("--fresh-optimizer", action="store_true",
                    help="a new Adam (and the warm-up again) at every step, from the current weights: what the "
                         "device curve does, each RL step being its own run from a carried actor (moments not carried)")
    ap.add_argument("--moments-file", action="store_true",
                    help="at every step after the first, Adam's moments go through the carried file (saved, the "
                         "optimizer cleared, loaded back): what the device curve does since session 32")
    ap.add_argument("--epochs", type=int, default=1, help="PPO epochs per step")
    ap.add_argument("--minibatches", type=int, default=4, help="optimizer steps per epoch")
    ap.add_argument("--target-kl", type=float, default=None, help="the PPO settings' target_kl (k3 bound)")
    ap.add_argument("--negative-scale", type=float, default=1.0,
                    help="the PPO settings' negative_scale: weight of negative advantages (1 plain PPO, 0 learns "
                         "from the better-than-baseline samples only)")
    ap.add_argument("--temperature", type=float, default=1.0, help="rollout sampling temperature")
    ap.add_argument("--eval-temperature", type=float, default=1.0, help="held-out sampling temperature")
    ap.add_argument("--eval-every", type=int, default=3,
                    help="held-out evaluation every k steps and after the last (0: after the last only)")
    ap.add_argument("--initial-eval", action=argparse.BooleanOptionalAction, default=True,
                    help="evaluate the held-out tasks before the first step (the starting actor's figures)")
    ap.add_argument("--eval-repeats", type=int, default=2, help="samples per held-out task")
    ap.add_argument("--heldout", type=int, default=64, help="held-out tasks (at most the family's)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the h200 preset's")
    ap.add_argument("--batch", type=int, default=32, help="generation batch")
    ap.add_argument("--out", type=Path, required=True, help="JSON results (rewritten after every step)")
    args = ap.parse_args(argv)
    for name in ("steps", "tasks", "samples", "epochs", "minibatches", "eval_every", "eval_repeats", "heldout", "batch"):
        v = getattr(args, name)
        if v < (0 if name in ("steps", "eval_every") else 1):
            raise SystemExit(f"--{name.replace('_', '-')} {v}: give a positive whole number"
                             + (" (or 0)" if name in ("steps", "eval_every") else ""))
    if args.samples < 2 and args.steps:
        raise SystemExit(f"--samples {args.samples}: the group baseline needs at least 2 samples per task")
    if args.fresh_optimizer and args.moments_file:
        raise SystemExit("--fresh-optimizer and --moments-file are two ways to begin a step: give one")
    if args.warmup < 0:
        raise SystemExit(f"--warmup {args.warmup}: give 0 or more optimizer steps")
    if min(args.lr, args.temperature, args.eval_temperature) <= 0:
        raise SystemExit("--lr, --temperature and --eval-temperature must be positive")

    import learning_curve as lc
    from ppo_trust_region import from_state
    from transformers import AutoTokenizer

    from cuda_agent.training.engines.deepspeed_engine import build_train_engine
    from cuda_agent.training.engines.models import load_causal_lm
    from cuda_agent.training.ppo_update import Learner, linear_warmup
    from cuda_agent.training.settings import EngineSettings, PPOSettings

    args.max_new_tokens = args.max_new_tokens or lc.PRESETS["h200"]["max_new_tokens"]
    actor_dir, experts = from_state(args.state, args.seed, args.work, args.actor_state)
    train = first_prompts(torch.load(experts, weights_only=False))
    heldout = first_prompts(torch.load(experts.parent / "expert_heldout.pt", weights_only=False))[: args.heldout]
    tok = AutoTokenizer.from_pretrained(actor_dir)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    torch.manual_seed(args.seed)
    engine = build_train_engine(load_causal_lm(actor_dir), args.lr, EngineSettings(zero_stage=0, dtype="fp32"))
    learner, model = Learner(engine), engine.module
    if args.warmup:
        learner.actor_lr_at = linear_warmup(args.lr, args.warmup)
    s = PPOSettings(ppo_epochs=args.epochs, minibatches=args.minibatches, gamma=1.0, lam=1.0, kl_coef=0.0,
                    entropy_coef=0.0, use_critic=False, baseline="group", target_kl=args.target_kl,
                    negative_scale=args.negative_scale)
    scorer = Scorer()
    order = random.Random(args.seed).sample(range(len(train)), len(train))  # each step's tasks new to the actor
    if args.steps * args.tasks > len(train):
        raise SystemExit(f"--steps {args.steps} x --tasks {args.tasks} is more than the {len(train)} training tasks")
    out: dict[str, Any] = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                           "actor": str(args.actor_state or args.state / f"state_seed{args.seed}.safetensors"),
                           "train_tasks": len(train), "heldout_tasks": len(heldout), "steps": [], "evals": []}

    def record_eval(step: int) -> None:
        e = {"step": step, **evaluate(model, tok, scorer, heldout, args, pad)}
        out["evals"].append(e)
        print(f"eval after step {step}: first_turn_ok {e['first_turn_ok']:.3f} ops_equal {e['ops_equal']:.3f} "
              f"tail share {e['tail_share']:.3f} ({e['replies']} replies, {e['seconds']} s)", flush=True)

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))

    if args.initial_eval or not args.steps:
        record_eval(0)
    save()
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        tasks = [train[i] for i in order[(step - 1) * args.tasks: step * args.tasks]]
        batch, roll = rollout_batch(model, tok, scorer, tasks, args, pad)
        gen_s = time.perf_counter() - t0
        model.train()
        batch.rollout_logp = learner.score(batch, args.minibatches)["old_logp"].clone()  # on-policy
        if args.fresh_optimizer and step > 1:  # the device's case before session 32: each step Adam afresh
            reset_optimizer(learner)
        elif args.moments_file and step > 1:  # the device's case since: the moments carried in their file
            carry_through_file(learner, args.work / "actor_moments.safetensors")
        m = learner.ppo_step(batch, s)
        row = {"step": step, **roll, "rollout_s": round(gen_s, 1), "update_s": round(m["update_s"], 1),
               **{k: m[k] for k in ("approx_kl", "approx_kl_max", "clip_frac", "log_ratio_min", "entropy",
                                    "update_minibatches", "kl_stopped") if k in m}}
        out["steps"].append(row)
        print(f"step {step}: rollout pass {roll['pass_rate']:.3f} (mixed groups {roll['mixed_groups']}/{args.tasks}, "
              f"tail {roll['tail_share']:.2f}) entropy {m.get('entropy', 0):.3f} approx_kl {m.get('approx_kl', 0):.4f} minibatches "
              f"{int(m['update_minibatches'])} | rollouts {gen_s:.0f} s, update {m['update_s']:.0f} s", flush=True)
        if (args.eval_every and step % args.eval_every == 0) or step == args.steps:
            record_eval(step)
        save()
    return out


if __name__ == "__main__":
    main()
