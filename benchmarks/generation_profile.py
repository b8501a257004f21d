"""Where a decode step's time goes for the learning curve's actor, loaded as the generation process loads it.

Session 20 measured, in the held-out evaluation's generation process (one seed, 16 episodes), 70-97 ms per decode
step with the process's CPU busy the whole time (``gen_cpu_s`` = ``gen_wall_s``) and almost no wait at the step's
device sync; ``benchmarks/generation_contention.py``'s engine steps in 7 ms on the same GPU. That benchmark builds
the model in memory (float32: ``HFRolloutEngine`` does not cast an in-memory model) and gives every row the same
prompt length; the rollouts load a saved folder in bfloat16 and left-pad rows of different lengths over up to
1100 new tokens. Each variant here changes one of those (ms per step, the engine's CPU and sync seconds):

* ``memory_fp32_equal``: the contention benchmark's engine;
* ``folder_bf16_equal``: loaded from a saved folder in bfloat16, as the generation process does;
* ``folder_bf16_padded``: the same, rows of different prompt lengths (left padding, attention mask);
* ``folder_bf16_padded_long``: the same over ``--long-tokens`` steps (the first turn writes ~900 tokens);
* ``idle_contexts``: ``folder_bf16_padded`` while ``--contexts`` other processes hold a CUDA context and memory
  (the episodes' reference processes and runners);
* ``torch_attention_fresh`` / ``generation_attention_fresh``: prompt lengths no earlier variant used, with SDPA
  free to pick any backend (cuDNN included: what the engine did until session 20) and with the engine's
  ``ATTENTION_BACKENDS`` (cuDNN excluded).

Session 20's run (before ``ATTENTION_BACKENDS`` existed, so every variant used torch's choice): 3.6 ms per step
for the fp32 engine, 42 and 62 ms for the bf16 folder's first equal and padded batches, 6 ms when the padded batch
came again under the profiler and beside 32 idle contexts, 36 ms over 900 steps of new lengths. Fresh shapes were
slow, repeated ones fast: cuDNN attention's per-shape plan builds.

The top self-CPU torch ops (``torch.profiler``) and Python functions (``cProfile``) of ``folder_bf16_padded`` are
written too.

    python benchmarks/generation_profile.py --out gen_profile.json
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing as mp
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]


def _rows(lengths: list[int], tokens: int, vocab: int) -> list[Any]:
    """Rows of the given prompt lengths (random ids), each sampling ``tokens`` tokens."""
    from cuda_agent.protocols import SamplingParams

    g = torch.Generator().manual_seed(1)
    return [(torch.randint(1, vocab - 2, (n,), generator=g).tolist(),
             SamplingParams(max_new_tokens=tokens, temperature=1.0, seed=i)) for i, n in enumerate(lengths)]


def _measure(engine: Any, rows: list[Any]) -> dict[str, float]:
    engine.eos_ids = set()  # every row runs its full length
    engine.generate_requests([(p[:16], s.model_copy(update={"max_new_tokens": 4})) for p, s in rows[:2]])  # warm-up
    t0 = time.perf_counter()
    engine.generate_requests(rows)
    wall = time.perf_counter() - t0
    prof = engine.profile
    return {"step_ms": round(1000 * wall / max(1, prof.steps), 2), **prof.as_log()}


def _idle_context(ready: Any, stop: Any, device: str, mib: int) -> None:
    """A process that holds a CUDA context and ``mib`` MiB, and waits (like an idle reference process)."""
    x = torch.empty(mib * 2**20, dtype=torch.uint8, device=device)
    x.fill_(1)
    torch.cuda.synchronize()
    ready.set()
    stop.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=9)
    ap.add_argument("--tokens", type=int, default=150)
    ap.add_argument("--long-tokens", type=int, default=900)
    ap.add_argument("--contexts", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=2048)
    args = ap.parse_args()

    from cuda_agent.training.engines.models import load_causal_lm
    from cuda_agent.training.kernel_family.corpus import ModelSize
    from cuda_agent.training.attention import ATTENTION_BACKENDS
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    cuda = torch.cuda.is_available()
    device = "cuda:0" if cuda else "cpu"
    model = load_causal_lm(ModelSize().as_config(args.vocab, eos=args.vocab - 1, pad=0), seed=0)
    folder = Path(tempfile.mkdtemp(prefix="gen_profile_"))
    model.save_pretrained(folder)
    equal = _rows([446] * args.rows, args.tokens, args.vocab)
    padded = _rows([419 + 3 * i for i in range(args.rows)], args.tokens, args.vocab)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "rows": args.rows,
                              "tokens": args.tokens, "variants": {}}

    def record(name: str, value: dict[str, Any]) -> None:
        result["variants"][name] = value
        print(name, json.dumps(value), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))

    record("memory_fp32_equal", _measure(HFRolloutEngine(model, None, device=device, batch_size=64), equal))
    folder_engine = HFRolloutEngine(folder, _no_tokenizer(), device=device, dtype="bfloat16",
                                    batch_size=64)
    result["folder_dtype"] = str(next(folder_engine.model.parameters()).dtype)
    record("folder_bf16_equal", _measure(folder_engine, equal))
    record("folder_bf16_padded", _measure(folder_engine, padded))

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        folder_engine.generate_requests(padded[:args.rows])
    result["top_cpu_ops"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
    pr = cProfile.Profile()
    pr.enable()
    folder_engine.generate_requests(padded)
    pr.disable()
    text = io.StringIO()
    pstats.Stats(pr, stream=text).sort_stats("tottime").print_stats(20)
    result["top_python"] = text.getvalue()[-6000:]
    print(result["top_cpu_ops"], result["top_python"], sep="\n", flush=True)

    long_rows = [(p, s.model_copy(update={"max_new_tokens": args.long_tokens})) for p, s in padded]
    record("folder_bf16_padded_long", _measure(folder_engine, long_rows))

    if cuda and args.contexts:
        ctx = mp.get_context("spawn")
        stop = ctx.Event()
        readies = [ctx.Event() for _ in range(args.contexts)]
        procs = [ctx.Process(target=_idle_context, args=(r, stop, device, 512), daemon=True) for r in readies]
        for p in procs:
            p.start()
        for r in readies:
            r.wait(timeout=120)
        try:
            record("idle_contexts", {**_measure(folder_engine, padded), "contexts": args.contexts})
        finally:
            stop.set()
            for p in procs:
                p.join(timeout=30)

    for name, attention, offset in (("torch_attention_fresh", None, 1000), ("generation_attention_fresh",
                                                                           ATTENTION_BACKENDS, 1500)):
        folder_engine.attention = attention
        fresh = _rows([offset + 3 * i for i in range(args.rows)], args.tokens, args.vocab)
        record(name, {**_measure(folder_engine, fresh), "backends": list(attention) if attention else "torch"})


def _no_tokenizer() -> Any:
    """The folder holds no tokenizer (stop strings unused): pass a stand-in with no EOS and no pad."""

    class _Bare:
        eos_token_id = None
        pad_token_id = 0

    return _Bare()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
