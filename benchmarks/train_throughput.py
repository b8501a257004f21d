"""Throughput and MFU of one PPO iteration (actor + critic) on DeepSpeed vs a plain PyTorch step.

Usage (one H200, about 4 minutes)::

    python benchmarks/train_throughput.py --out train_throughput.json
    deepspeed --num_gpus 2 benchmarks/train_throughput.py --out train_throughput_2gpu.json   # per-GPU figures

Model: random init with Qwen2-1.5B's shapes (written below as a config dict,
nothing downloaded), bf16, SDPA attention, gradient checkpointing. Batch: a
realistic mix of multi-turn episode lengths up to 16K tokens (the policy
mask covers ~60% of each, the rest is prompt and observations); one PPO
minibatch (= one optimizer step of actor and critic) per episode, no padding.

All engines run the *same* code, :class:`cuda_agent.training.ppo_update.Learner`:
scoring passes (actor log-probs, critic values) then the clipped actor and
critic updates. "deepspeed" wraps actor and critic with ``deepspeed.initialize``
(ZeRO-2, bf16 with fp32 master weights, gradients and Adam states: what
training uses, torch fused AdamW as client optimizer); "deepspeed_bf16" is
the same with bf16 master weights, gradients and Adam states
(``engine.master_weights: bf16``), i.e. the plain step's arithmetic; "plain"
is the bare module with bf16 weights and fused AdamW. The like-for-like
comparison is deepspeed_bf16 vs plain; deepspeed vs plain adds the cost of
fp32 masters. ``deepspeed_bf16/z0`` is ZeRO stage 0 with bf16 masters,
DeepSpeed's native mode (``training/engines/native_step.py``): at one GPU
there is nothing to shard, and the ZeRO-1/2 gradient bucket copies go away. Each engine's time is split into forward, backward and
optimizer step (device-synchronised around each call; 24 syncs per iteration).

FLOP convention (ANCHORS.md): per token, training = 6 x parameters (LM head
included, input embedding lookup excluded) + 6 x layers x hidden x sequence
(causal attention); forward-only scoring passes count 2x instead of 6x;
recomputation from checkpointing is not counted; non-padding tokens only.
``--checkpoint-fraction F`` recomputes only that share of the decoder layers.
Peak = 790 TFLOP/s (dense bf16, H200, measured). Writes JSON and prints a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from typing import Any

# Long sequences of varying length fragment the caching allocator; expandable segments avoid the retries.
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
import torch  # noqa: E402

QWEN2_1_5B = {
    "model_type": "qwen2",
    "vocab_size": 151936,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
PEAK_TFLOPS = 790.0
#: Episode lengths of one PPO batch: long multi-turn trajectories with a tail of shorter ones.
LENGTHS = [16384, 16384, 14336, 12288, 10240, 8192]


class TimedEngine:
    """Wraps an engine; adds device-synchronised seconds of forward, backward and step to ``phases``."""

    def __init__(self, engine: Any, name: str, phases: dict[str, float]) -> None:
        self._engine, self._name, self._phases = engine, name, phases
        self.module = engine.module
        #: When a list, ``step`` runs under torch.profiler and appends the profile (``--profile-steps``).
        self.step_profiles: list[Any] | None = None

    def _timed(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        torch.cuda.synchronize()
        key = f"{self._name}_{what}" if torch.is_grad_enabled() or what != "forward" else f"{self._name}_score"
        self._phases[key] = self._phases.get(key, 0.0) + time.perf_counter() - t0
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed("forward", self._engine, *args, **kwargs)

    def backward(self, loss: torch.Tensor) -> None:
        self._timed("backward", self._engine.backward, loss)

    def step(self) -> None:
        if self.step_profiles is None:
            self._timed("step", self._engine.step)
            return
        import cProfile
        import io
        import pstats

        from torch.profiler import ProfilerActivity, profile

        # torch.profiler sees aten operators and CUDA calls only; Python work between them (DeepSpeed's own
        # bookkeeping, the garbage collector) shows in cProfile's cumulative times.
        py = cProfile.Profile()
        before = self._phases.get(f"{self._name}_step", 0.0)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            py.enable()
            try:
                self._timed("step", self._engine.step)
            finally:
                py.disable()
        text = io.StringIO()
        pstats.Stats(py, stream=text).sort_stats("cumulative").print_stats(25)
        prof.wall_s = self._phases[f"{self._name}_step"] - before  # type: ignore[attr-defined]
        prof.python_profile = text.getvalue()  # type: ignore[attr-defined]
        prof.engine_name = self._name  # type: ignore[attr-defined]
        self.step_profiles.append(prof)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class PlainEngine:
    """The DeepSpeed engine calls the Learner makes, on a bare module with fused AdamW (the baseline)."""

    def __init__(self, module: torch.nn.Module, lr: float) -> None:
        self.module = module
        # The DeepSpeed engines' client AdamW (EngineSettings: weight_decay 0, betas (0.9, 0.999), eps 1e-8); torch's
        # AdamW default weight_decay is 0.01.
        self.optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=lr, fused=True,
                                           weight_decay=0.0)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def make_batch(lengths: list[int], vocab: int, seed: int = 0):
    """Episodes with a multi-turn mask layout (prompt, then alternating policy turns and observations)."""
    from cuda_agent.training.buffers import Episode, collate

    g = torch.Generator().manual_seed(seed)
    eps = []
    for n in lengths:
        ids = torch.randint(0, vocab, (n,), generator=g).tolist()
        mask = [0] * n
        pos = n // 10  # prompt
        turn = 0
        while pos < n:
            span = min(n - pos, 1536 if turn % 2 == 0 else 768)  # policy turn, then observation
            if turn % 2 == 0:
                mask[pos : pos + span] = [1] * span
            pos += span
            turn += 1
        logps = [(-1.0 if m else 0.0) for m in mask]
        eps.append(Episode(ids, mask, logps, reward=float(torch.randint(-1, 4, (1,), generator=g)), turns=(turn + 1) // 2))
    return collate(eps)


def flops_of_iteration(lengths: list[int], actor_params: int, critic_params: int, layers: int, hidden: int) -> dict[str, float]:
    """Model FLOPs of one PPO iteration: scoring (forward) + update (forward+backward) of actor and critic."""
    # Causal attention, ANCHORS.md convention: 6 x layers x hidden x sequence per trained token, i.e.
    # 6 x layers x hidden x n^2 per sequence of n tokens (forward-only: a third of it). Both models attend.
    attn = sum(layers * hidden * n * n for n in lengths)
    tokens = sum(lengths)
    train = 6 * (actor_params + critic_params) * tokens + 6 * 2 * attn  # 2 models
    score = 2 * (actor_params + critic_params) * tokens + 2 * 2 * attn
    return {"train": float(train), "score": float(score), "total": float(train + score), "tokens": float(tokens)}


ENGINE_MODIFIERS = {"nooverlap": {"zero_overlap_comm": "off"}, "overlap": {"zero_overlap_comm": "on"},
                    "nocontig": {"zero_contiguous_gradients": False},
                    **{f"z{n}": {"zero_stage": n} for n in range(4)}}


def engine_settings(kind: str, settings: Any) -> Any:
    """The EngineSettings of an engine spec such as 'deepspeed_bf16/nooverlap' (None for 'plain')."""
    base, *mods = kind.split("/")
    if base not in ("plain", "deepspeed", "deepspeed_bf16"):
        raise ValueError(f"unknown engine {base!r} in {kind!r}; valid: plain, deepspeed, deepspeed_bf16")
    if base == "plain":
        if mods:
            raise ValueError(f"engine {kind!r}: modifiers apply to DeepSpeed engines only")
        return None
    update: dict[str, Any] = {"master_weights": "bf16" if base == "deepspeed_bf16" else "fp32"}
    for m in mods:
        if m not in ENGINE_MODIFIERS:
            raise ValueError(f"engine {kind!r}: unknown modifier {m!r}; valid: {', '.join(ENGINE_MODIFIERS)}")
        update.update(ENGINE_MODIFIERS[m])
    return settings.model_copy(update=update)


def build(kind: str, settings: Any) -> tuple[Any, Any]:
    """Actor and critic engines of one kind ('plain' or a DeepSpeed spec, see :func:`engine_settings`)."""
    from cuda_agent.training.engines.deepspeed_engine import build_train_engine
    from cuda_agent.training.engines.models import CriticModel, enable_gradient_checkpointing, load_causal_lm

    with torch.device("cuda"):
        actor_m = load_causal_lm(QWEN2_1_5B, dtype=torch.bfloat16, seed=0)
        critic_m = CriticModel(load_causal_lm(QWEN2_1_5B, dtype=torch.bfloat16, seed=0))
    s = engine_settings(kind, settings)
    if s is not None:
        return build_train_engine(actor_m, 1e-6, s), build_train_engine(critic_m, 1e-6, s)
    for m in (actor_m, critic_m):
        if settings.gradient_checkpointing:
            enable_gradient_checkpointing(m, settings.checkpoint_fraction)
        m.train()
    return PlainEngine(actor_m, 1e-6), PlainEngine(critic_m, 1e-6)


def step_profile_table(profiles: list[Any], rows: int = 15) -> str:
    """The busiest operations of the first two profiled optimizer steps (the actor's and the critic's), by self
    CUDA time, then by self CPU time."""
    out = []
    for sort in ("self_cuda_time_total", "self_cpu_time_total"):
        for i, prof in enumerate(profiles[:2]):  # the actor's and the critic's first step are enough
            head = f"-- step {i} ({getattr(prof, 'engine_name', '?')}, wall {getattr(prof, 'wall_s', 0.0) * 1e3:.1f} ms) by {sort}"
            out.append(head + "\n" + prof.key_averages().table(sort_by=sort, row_limit=rows, max_name_column_width=60))
    for i, prof in enumerate(profiles[:2]):
        if getattr(prof, "python_profile", None):
            out.append(f"-- step {i} ({getattr(prof, 'engine_name', '?')}): Python, by cumulative time\n{prof.python_profile}")
    return "\n".join(out)


def measure(kind: str, batch: Any, iters: int, settings: Any, profile_steps: bool = False) -> dict[str, Any]:
    """Median seconds of ``iters`` PPO iterations after one warm-up."""
    from cuda_agent.training.engines.models import count_parameters
    from cuda_agent.training.ppo_update import Learner
    from cuda_agent.training.settings import PPOSettings

    actor, critic = build(kind, settings)
    n_actor = count_parameters(actor.module) - 0  # tied embeddings: the LM head is counted once
    n_critic = count_parameters(critic.module) - critic.module.backbone.embed_tokens.weight.numel()
    phases: dict[str, float] = {}
    timed = [TimedEngine(actor, "actor", phases), TimedEngine(critic, "critic", phases)]
    learner = Learner(timed[0], timed[1], logit_chunk=2048)
    profiles: list[Any] = []
    per_iter: list[dict[str, float]] = []
    ppo = PPOSettings(minibatches=batch.size, ppo_epochs=1, kl_coef=0.0)
    times: list[float] = []
    for i in range(iters + 1):
        if profile_steps and i == iters:  # the last iteration: its phases then include the profiler's overhead
            for t in timed:
                t.step_profiles = profiles
        phases.clear()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        m = learner.ppo_step(batch, ppo)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if i > 0 and not (profile_steps and i == iters):
            times.append(dt)
            per_iter.append(dict(phases, other=dt - sum(phases.values())))
        parts = " ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items()))
        print(f"  {kind} iteration {i}: {dt:.2f} s (policy_loss {m['policy_loss']:.4f}; {parts})", flush=True)
    peak_mem = torch.cuda.max_memory_allocated() / 2**30
    table = step_profile_table(profiles) if profiles else None
    if table:
        print(table, flush=True)
    del learner, actor, critic
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    times.sort()
    mid = sorted(range(len(times)), key=times.__getitem__)[len(times) // 2]
    return {"seconds": times[mid], "all_seconds": times, "actor_params": n_actor, "phase_s": per_iter[mid],
            "critic_params": n_critic, "peak_mem_gib": peak_mem, "step_profile": table}


def main() -> int:
    """Run both engines on the same batch; print and write the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="train_throughput.json", help="JSON output file")
    ap.add_argument("--iters", type=int, default=3, help="timed PPO iterations per engine (after one warm-up)")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="episode lengths of the batch")
    ap.add_argument("--zero-stage", type=int, default=2, choices=[0, 1, 2, 3],
                    help="DeepSpeed ZeRO stage of every DeepSpeed engine without a /zN modifier (0 with fp32 masters: "
                         "DeepSpeed's BF16_Optimizer; 0 with bf16 masters: its native mode)")
    ap.add_argument("--no-checkpointing", action="store_true",
                    help="Train without gradient checkpointing (both engines; more memory, no recomputation).")
    ap.add_argument("--no-overflow-check", action="store_true",
                    help="DeepSpeed engines skip the per-tensor inf/NaN scan before each step (engine.overflow_check).")
    ap.add_argument("--no-fused-zero-step", action="store_true",
                    help="DeepSpeed engines run DeepSpeed's own ZeRO-1/2 step, per-tensor loops included "
                         "(engine.fused_zero_step off; for before/after comparisons).")
    ap.add_argument("--profile-steps", action="store_true",
                    help="One extra iteration whose optimizer steps run under torch.profiler (tables printed and saved).")
    ap.add_argument("--checkpoint-fraction", type=float, default=1.0,
                    help="Share of decoder layers recomputed in backward when checkpointing (1.0 = all).")
    ap.add_argument("--engines", default="plain,deepspeed_bf16/z0,deepspeed",
                    help="Engines to measure, comma-separated: plain, deepspeed (fp32 masters), deepspeed_bf16; a "
                         "DeepSpeed engine may carry modifiers: /nooverlap (zero_overlap_comm off), /overlap (on), "
                         "/nocontig (zero_contiguous_gradients off), /z0 ... /z3 (this ZeRO stage instead of "
                         "--zero-stage), e.g. deepspeed_bf16/nooverlap/nocontig, deepspeed_bf16/z0 (DeepSpeed's "
                         "native mode: training/engines/native_step.py).")
    ap.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)  # from the deepspeed launcher
    args = ap.parse_args()
    from cuda_agent.training.engines.deepspeed_engine import ensure_distributed
    from cuda_agent.training.settings import EngineSettings

    torch.backends.cuda.matmul.allow_tf32 = True
    rank, world = ensure_distributed()  # under `deepspeed --num_gpus N`, every rank runs its own batch (data parallel)
    lengths = [int(x) for x in args.lengths.split(",")]
    batch = make_batch(lengths, QWEN2_1_5B["vocab_size"])
    settings = EngineSettings(zero_stage=args.zero_stage, dtype="bf16", gradient_checkpointing=not args.no_checkpointing,
                              checkpoint_fraction=args.checkpoint_fraction, overflow_check=not args.no_overflow_check,
                              fused_zero_step=not args.no_fused_zero_step)
    engines = [e for e in args.engines.split(",") if e]
    try:
        for e in engines:
            engine_settings(e, settings)
    except ValueError as e:
        ap.error(str(e))
    results: dict[str, Any] = {"model": "qwen2-1.5b-shapes (random init)", "lengths": lengths,
                               "peak_tflops": PEAK_TFLOPS, "zero_stage": args.zero_stage,
                               "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "world_size": world, "note": "tokens/s and MFU are per GPU",
                               "gradient_checkpointing": not args.no_checkpointing,
                               "checkpoint_fraction": args.checkpoint_fraction, "overflow_check": not args.no_overflow_check,
                               "fused_zero_step": not args.no_fused_zero_step,
                               "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    for kind in engines:
        try:
            r = measure(kind, batch, args.iters, settings, profile_steps=args.profile_steps)
        except (torch.OutOfMemoryError, ValueError) as e:  # report it and measure the other engines
            oom = isinstance(e, torch.OutOfMemoryError)
            print(f"  {kind}: {'out of GPU memory' if oom else 'refused'} ({str(e).splitlines()[0]})", flush=True)
            results[kind] = {"error": "out of memory" if oom else str(e)}
            gc.collect()
            torch.cuda.empty_cache()
            continue
        f = flops_of_iteration(lengths, r["actor_params"], r["critic_params"], QWEN2_1_5B["num_hidden_layers"],
                               QWEN2_1_5B["hidden_size"])
        es = engine_settings(kind, settings)
        r.update({"zero_stage": None if es is None else es.zero_stage, "tokens": f["tokens"], "tokens_per_s": f["tokens"] / r["seconds"],
                  "model_tflops": f["total"] / 1e12, "mfu": f["total"] / r["seconds"] / (PEAK_TFLOPS * 1e12)})
        results[kind] = r
    ok = {k: r for k, r in results.items() if k in engines and "error" not in r}
    for kind in engines:
        if kind != "plain" and kind in ok and "plain" in ok:
            results[f"{kind}_vs_plain"] = ok[kind]["tokens_per_s"] / ok["plain"]["tokens_per_s"]
    if rank != 0:
        return 0
    print(f"{'engine':<34} {'s/iter':>8} {'tokens/s':>10} {'MFU':>7} {'peak GiB':>9}  phases (s)")
    for kind in engines:
        r = results[kind]
        if "error" in r:
            print(f"{kind:<34} {r['error']}")
            continue
        parts = " ".join(f"{k} {v:.2f}" for k, v in sorted(r["phase_s"].items()))
        print(f"{kind:<34} {r['seconds']:8.2f} {r['tokens_per_s']:10.0f} {100 * r['mfu']:6.1f}% {r['peak_mem_gib']:9.1f}  {parts}")
    for kind in engines:
        if f"{kind}_vs_plain" in results:
            print(f"{kind} / plain throughput: {results[f'{kind}_vs_plain']:.3f}")
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
