"""Why batched generation slows down beside the kernel environment: decode step time under each kind of contention.

Session 19 measured 75-130 ms per decode step of the learning curve's 6-layer actor (hidden 256, bf16) on the H200
while three seeds' held-out evaluations ran beside it; such a model should step in a few milliseconds. Three causes
are possible, and each wants a different fix:

* ``alone``: the engine by itself (the floor);
* ``busy_threads``: Python threads of the same process keep the GIL busy (the episode threads, their clients);
* ``gpu_load``: another process keeps the GPU busy with back-to-back kernels (timing loops, warm-ups): the GPU
  time-slices between the two contexts;
* ``gpu_load_locked``: the same load, but it takes the device's timing lock per burst (a timed batch) and
  generation holds that lock's shared mode per batch (``rollout.exclusive_device``, the default since session 19;
  shared since session 20);
* ``peers``: two more processes generate at the same time (the seeds side by side);
* ``busy_threads_process``: the ``busy_threads`` load, with the engine in a child process of its own
  (:class:`~cuda_agent.training.rollout.process_engine.ProcessRolloutEngine`, ``rollout.engine_process``, the
  default since session 20): the busy threads share the stage's GIL, not the decode loop's.

Each condition generates ``--tokens`` tokens for ``--batch`` rows after a ``--prompt``-token prefill with the
real :class:`~cuda_agent.training.rollout.hf_engine.HFRolloutEngine` (random weights of the preset's shape;
sampling ignores EOS by giving each row a fixed length) and reports milliseconds per step. On a CPU-only machine it
runs on the CPU (a rehearsal: the figures mean nothing there).

    python benchmarks/generation_contention.py --out gen_contention.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
CONDITIONS = ("alone", "busy_threads", "gpu_load", "gpu_load_locked", "peers", "busy_threads_process")


def make_engine(device: str, dtype: str, vocab: int, seed: int = 0) -> Any:
    """An HF engine over a random decoder of the learning curve's h200 actor shape."""
    from cuda_agent.training.engines.models import load_causal_lm
    from cuda_agent.training.kernel_family.corpus import ModelSize
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    model = load_causal_lm(ModelSize().as_config(vocab, eos=vocab - 1, pad=0), seed=seed)
    model.generation_config.eos_token_id = vocab - 1
    return HFRolloutEngine(model, None, device=device, dtype=dtype, batch_size=64)


def step_ms(engine: Any, batch: int, prompt: int, tokens: int, vocab: int, hold: Any = None) -> float:
    """Milliseconds per decode step of one batch (prefill included, as in the rollouts)."""
    from cuda_agent.protocols import SamplingParams

    g = torch.Generator().manual_seed(1)
    rows = [(torch.randint(1, vocab - 2, (prompt,), generator=g).tolist(),
             SamplingParams(max_new_tokens=tokens, temperature=1.0, seed=i)) for i in range(batch)]
    engine.eos_ids = set()  # every row runs its full length (a process engine's folder is saved without EOS)
    t0 = time.perf_counter()
    if hold is not None:
        with hold:
            engine.generate_requests(rows)
    else:
        engine.generate_requests(rows)
    return 1000 * (time.perf_counter() - t0) / tokens


def process_engine(engine: Any, args: argparse.Namespace, device: str) -> Any:
    """The same weights served by a child process (saved without an EOS id, so every row runs its full length)."""
    import tempfile

    from cuda_agent.training.rollout.process_engine import ProcessRolloutEngine

    folder = Path(tempfile.mkdtemp(prefix="gen_contention_model_"))
    engine.model.generation_config.eos_token_id = None
    engine.model.save_pretrained(folder)
    served = ProcessRolloutEngine(folder, device=device, dtype=args.dtype, batch_size=64)
    step_ms(served, 2, 16, 4, args.vocab)  # warm-up
    return served


def _gpu_load(stop: Any, ready: Any, device: str, lock_dir: str | None, burst_s: float) -> None:
    """Back-to-back matmuls on ``device`` until ``stop``; with ``lock_dir``, each burst under the timing lock."""
    from cuda_agent.harness.timing_stats import device_timing_lock

    dev = torch.device(device)
    a = torch.randn(2048, 2048, device=dev)
    lock = device_timing_lock(dev.type, dev.index or 0, lock_dir=Path(lock_dir)) if lock_dir else None
    ready.set()
    while not stop.is_set():
        if lock is not None:
            with lock:
                end = time.perf_counter() + burst_s
                while time.perf_counter() < end:
                    a = (a @ a).clamp_(-1, 1)
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
            time.sleep(0.001)
        else:
            a = (a @ a).clamp_(-1, 1)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)


def _peer(stop: Any, ready: Any, device: str, dtype: str, vocab: int, batch: int, prompt: int, tokens: int) -> None:
    engine = make_engine(device, dtype, vocab, seed=1)
    ready.set()
    while not stop.is_set():
        step_ms(engine, batch, prompt, tokens, vocab)


def _busy(stop: threading.Event) -> None:
    """A thread that wants the GIL often: short Python work between short sleeps (like clients polling)."""
    while not stop.is_set():
        sum(i * i for i in range(2000))
        time.sleep(0.0005)


def run_condition(name: str, engine: Any, args: argparse.Namespace, device: str) -> dict[str, Any]:
    """One condition's step times (median of ``--repeats``)."""
    from cuda_agent.harness.timing_stats import SharedHold, device_timing_lock

    ctx = mp.get_context("spawn")
    stop, ready = ctx.Event(), ctx.Event()
    procs: list[Any] = []
    threads: list[threading.Thread] = []
    tstop = threading.Event()
    hold = None
    lock_dir = str(args.lock_dir)
    if name in ("busy_threads", "busy_threads_process"):
        threads = [threading.Thread(target=_busy, args=(tstop,), daemon=True) for _ in range(args.threads)]
    if name == "busy_threads_process":
        engine = process_engine(engine, args, device)
    elif name in ("gpu_load", "gpu_load_locked"):
        locked = name == "gpu_load_locked"
        procs = [ctx.Process(target=_gpu_load, args=(stop, ready, device, lock_dir if locked else None, args.burst_s))]
        if locked:
            dev = torch.device(device)
            hold = SharedHold(device_timing_lock(dev.type, dev.index or 0, lock_dir=args.lock_dir))  # as the rollouts
    elif name == "peers":
        procs = [ctx.Process(target=_peer, args=(stop, ready, device, args.dtype, args.vocab, args.batch, args.prompt,
                                                 args.tokens)) for _ in range(2)]
    for t in threads:
        t.start()
    for p in procs:
        p.start()
    if procs:
        ready.wait(timeout=300)
        time.sleep(1.0)
    try:
        samples = [step_ms(engine, args.batch, args.prompt, args.tokens, args.vocab, hold) for _ in range(args.repeats)]
    finally:
        tstop.set()
        stop.set()
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
        if name == "busy_threads_process":
            engine.close()
    samples.sort()
    profile = getattr(engine, "profile", None)  # the last batch: CPU seconds and device-sync seconds of its steps
    return {"step_ms_median": round(samples[len(samples) // 2], 2), "step_ms": [round(x, 2) for x in samples],
            "last_batch": profile.as_log() if profile is not None else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--conditions", default=",".join(CONDITIONS), help=f"comma list of {', '.join(CONDITIONS)}")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=1500)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=16, help="busy_threads: how many")
    ap.add_argument("--burst-s", type=float, default=0.5, help="gpu_load_locked: seconds of load per lock hold")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on CUDA, float32 on the CPU")
    ap.add_argument("--lock-dir", type=Path, default=Path("/tmp/gen_contention_locks"))
    args = ap.parse_args()
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    args.dtype = args.dtype or ("bfloat16" if device != "cpu" else "float32")
    args.lock_dir.mkdir(parents=True, exist_ok=True)
    names = [c for c in args.conditions.split(",") if c]
    unknown = [c for c in names if c not in CONDITIONS]
    if unknown:
        raise SystemExit(f"unknown condition(s) {unknown}; valid: {', '.join(CONDITIONS)}")
    engine = make_engine(device, args.dtype, args.vocab)
    step_ms(engine, 2, 16, 4, args.vocab)  # warm-up
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if device != "cpu" else "cpu",
                              "batch": args.batch, "prompt": args.prompt, "tokens": args.tokens, "dtype": args.dtype,
                              "conditions": {}}
    for name in names:
        t0 = time.time()
        result["conditions"][name] = run_condition(name, engine, args, device)
        result["conditions"][name]["wall_s"] = round(time.time() - t0, 1)
        print(name, json.dumps(result["conditions"][name]), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))  # after every condition: a run cut by its cap keeps them
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
