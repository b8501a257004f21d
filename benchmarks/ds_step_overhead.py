"""Cost of one optimizer step alone: plain fused AdamW vs DeepSpeed ZeRO-1/2, with and without ``fused_zero_step``.

Usage::

    python benchmarks/ds_step_overhead.py --out ds_step_overhead.json                 # CPU: 28 tiny layers, 339 tensors
    python benchmarks/ds_step_overhead.py --qwen2-1.5b --out ds_step_overhead.json    # GPU: Qwen2-1.5B shapes

Each engine gets a fresh model (Qwen2 shapes, random init, bf16), a few warm-up steps, then ``--steps`` timed
optimizer steps: forward and backward of a short batch run untimed, then the step alone between two device
synchronisations (median and minimum wall time, median process CPU time: host work, less disturbed by other
processes on a shared machine). One more step runs under torch.profiler to count the aten operators (and, on
CUDA, kernel launches and device time) of a step. "plain" is ``benchmarks/train_throughput.py``'s baseline:
``clip_grad_norm_(1.0)`` + fused AdamW (no weight decay, like the engines') + ``zero_grad``; the DeepSpeed engines are built by
``build_train_engine`` (clip 1.0, torch AdamW as client optimizer, the overflow check on) and named
``ds_z<stage>_<masters>[_fused]``. On CPU the milliseconds are mostly host overhead, the thing the fused step
removes; on a GPU both host and device time count. Writes JSON and prints a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

TINY = {"model_type": "qwen2", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 28,
        "num_attention_heads": 2, "num_key_value_heads": 1}
# The same model and plain baseline as train_throughput.py (one definition: this folder is not a package).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_throughput import QWEN2_1_5B, PlainEngine as PlainStep  # noqa: E402


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def build(name: str, cfg: dict) -> Any:
    """An engine by name: 'plain' or 'ds_z<1|2>_<fp32|bf16>[_fused]'."""
    from cuda_agent.training.engines.deepspeed_engine import build_train_engine, local_device
    from cuda_agent.training.engines.models import load_causal_lm
    from cuda_agent.training.settings import EngineSettings

    model = load_causal_lm(cfg, dtype=torch.bfloat16, seed=0)
    if name == "plain":
        model = model.to(local_device())
        model.train()
        return PlainStep(model, 1e-6)
    _, stage, masters, *fused = name.split("_")
    settings = EngineSettings(zero_stage=int(stage[1:]), dtype="bf16", master_weights=masters,
                              fused_zero_step=bool(fused), overflow_check=True, grad_clip=1.0)
    return build_train_engine(model, 1e-6, settings)


def measure(name: str, cfg: dict, steps: int, warmup: int, tokens: int) -> dict[str, Any]:
    """Median step seconds, aten ops (and CUDA launches / device ms) per step of one engine."""
    from torch.profiler import ProfilerActivity, profile

    engine = build(name, cfg)
    device = next(engine.module.parameters()).device
    ids = torch.randint(0, cfg["vocab_size"], (1, tokens), generator=torch.Generator().manual_seed(0)).to(device)

    def forward_backward() -> None:
        loss = engine(input_ids=ids).logits.float().mean()
        engine.backward(loss)

    times, cpu_times = [], []
    for i in range(warmup + steps):
        forward_backward()
        _sync()
        t0, c0 = time.perf_counter(), time.process_time()
        engine.step()
        _sync()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    forward_backward()
    _sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        engine.step()
        _sync()
    events = prof.key_averages()
    aten_ops = sum(e.count for e in events if e.key.startswith("aten::"))
    launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC"))
    device_ms = sum(getattr(e, "self_device_time_total", 0.0) for e in events) / 1e3
    out = {"step_ms": 1e3 * statistics.median(times), "step_ms_min": 1e3 * min(times),
           "step_cpu_ms": 1e3 * statistics.median(cpu_times),
           "step_ms_all": [1e3 * t for t in times], "aten_ops": aten_ops,
           "kernel_launches": launches if device.type == "cuda" else None,
           "device_ms": device_ms if device.type == "cuda" else None,
           "optimizer": type(getattr(engine, "optimizer", None)).__name__,
           "tensors": sum(1 for p in engine.module.parameters() if p.requires_grad)}
    return out


def main() -> int:
    """Measure the engines; print and write the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="ds_step_overhead.json", help="JSON output file")
    ap.add_argument("--qwen2-1.5b", dest="big", action="store_true", help="Qwen2-1.5B shapes (GPU) instead of 28 tiny layers")
    ap.add_argument("--hidden", type=int, default=None,
                    help="tiny model: hidden size (intermediate = 2x); smaller = closer to pure host overhead")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per engine (median and minimum reported)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--tokens", type=int, default=16, help="tokens of the forward/backward before each step")
    ap.add_argument("--engines", default="plain,ds_z1_fp32,ds_z1_fp32_fused,ds_z1_bf16,ds_z1_bf16_fused,"
                    "ds_z2_fp32,ds_z2_fp32_fused,ds_z2_bf16,ds_z2_bf16_fused",
                    help="comma-separated: plain, ds_z<1|2>_<fp32|bf16>[_fused]")
    args = ap.parse_args()
    from cuda_agent.training.engines.deepspeed_engine import ensure_distributed

    ensure_distributed()
    torch.manual_seed(0)
    if not torch.cuda.is_available():
        torch.set_num_threads(1)  # host overhead, not CPU GEMM threads
    cfg = QWEN2_1_5B if args.big else dict(TINY)
    if args.hidden and not args.big:
        cfg.update(hidden_size=args.hidden, intermediate_size=2 * args.hidden)
    results: dict[str, Any] = {"model": "qwen2-1.5b shapes" if args.big else f"qwen2 28 tiny layers, hidden {cfg['hidden_size']}", "config": cfg,
                               "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                               "torch": torch.__version__, "steps": args.steps, "engines": {}}
    print(f"{'engine':<20} {'step ms':>9} {'min ms':>8} {'cpu ms':>8} {'aten ops':>9} {'launches':>9} {'device ms':>10}  optimizer")
    for name in [e for e in args.engines.split(",") if e]:
        r = measure(name, cfg, args.steps, args.warmup, args.tokens)
        gc.collect()  # the engine of the last measurement goes before the next is built
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        results["engines"][name] = r
        launches = "-" if r["kernel_launches"] is None else str(r["kernel_launches"])
        dev = "-" if r["device_ms"] is None else f"{r['device_ms']:.2f}"
        print(f"{name:<20} {r['step_ms']:9.2f} {r['step_ms_min']:8.2f} {r['step_cpu_ms']:8.2f} {r['aten_ops']:9d} {launches:>9} {dev:>10}  {r['optimizer']}", flush=True)
    import deepspeed

    results["deepspeed"] = deepspeed.__version__
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
