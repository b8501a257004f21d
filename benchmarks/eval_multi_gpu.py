"""Evaluation throughput per GPU on one GPU vs on every local GPU (issue: multi-GPU runs).

Three ``cuda-agent eval`` runs of the example tasks with their scripted CUDA
trajectories (``configs/eval/examples_cuda.yaml``), each in a fresh output folder:

1. warm-up on all GPUs, one seed per task (fills the baseline and build caches
   every later run shares, so neither measured run pays a cold start the other
   does not);
2. ``eval.devices=[0]`` with ``--seeds S``;
3. ``eval.devices=[0..N-1]`` with ``--seeds N*S`` (N times the work).

Throughput = episodes / session wall seconds (``OUT/sessions/0000.json``), per
GPU = that / number of devices. Also reported: each device's timing-lock
utilisation and the pass counts, so a fast but broken run cannot look good.
Target: per-GPU throughput on N GPUs within 10% of the one-GPU figure.

    python benchmarks/eval_multi_gpu.py --out DIR [--seeds 2] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "eval" / "examples_cuda.yaml"


def eval_run(base: list[str], out: Path, devices: list[int], seeds: int, concurrency: int,
             build_workers: int) -> dict[str, Any]:
    """One ``cuda-agent eval`` run (``base``: the config and task arguments); returns its figures and pass counts."""
    cmd = [sys.executable, "-m", "cuda_agent.cli", "eval", *base, "--out", str(out),
           "--seeds", str(seeds), "--concurrency", str(concurrency),
           "-o", f"eval.devices={json.dumps(devices)}", "-o", f"eval.build_workers={build_workers}",
           "-o", "eval.progress=false", "--no-plots"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"eval failed (rc {proc.returncode}): {' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    session = json.loads((out / "sessions" / "0000.json").read_text())
    statuses: dict[str, int] = {}
    for ev in sorted((out / "episodes").glob("*/eval.json")):
        rec = json.loads(ev.read_text())
        graded = (rec.get("regrades") or {}).get("best") or {}
        status = graded.get("status", "runner_error" if rec.get("runner_error") else "no candidate")
        statuses[status] = statuses.get(status, 0) + 1
    episodes = session["episodes_run"]
    return {
        "devices": devices, "seeds": seeds, "episodes": episodes, "session_wall_s": session["wall_s"],
        "process_wall_s": wall, "episodes_per_hour": 3600.0 * episodes / session["wall_s"],
        "episodes_per_gpu_hour": 3600.0 * episodes / session["wall_s"] / len(devices),
        "device_slots": session["devices"], "best_status_counts": statuses,
    }


def main() -> int:
    """Warm up, run on one GPU, run on all; print and write the comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="Output folder (one subfolder per eval run + result.json).")
    ap.add_argument("--seeds", type=int, default=2, help="Seeds per task on one GPU (N GPUs run N times as many).")
    ap.add_argument("--concurrency", type=int, default=8, help="Episodes in flight per GPU.")
    ap.add_argument("--build-workers", type=int, default=6, help="Compile calls at once per GPU.")
    ap.add_argument("--gpus", type=int, default=None, help="GPUs for the multi-GPU run (default: all visible).")
    ap.add_argument("--config", type=Path, default=CONFIG, help="Eval config (default: the CUDA example tasks).")
    ap.add_argument("--limit", type=int, default=None, help="At most this many tasks.")
    ap.add_argument("--cpu-slots", type=int, default=None,
                    help="Smoke test without GPUs: run the comparison over this many CPU device slots "
                    "(use with configs/eval/examples_cpu.yaml).")
    args = ap.parse_args()
    import torch

    base = ["-c", str(args.config), *(["--limit", str(args.limit)] if args.limit else [])]
    n = args.cpu_slots or args.gpus or torch.cuda.device_count()
    if n < 2:
        raise SystemExit(f"needs at least 2 visible GPUs, found {n} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')})")
    args.out.mkdir(parents=True, exist_ok=True)
    all_dev = list(range(n))
    partial: dict[str, Any] = {"benchmark": "eval_multi_gpu", "gpus": n, "partial": True}

    def keep(key: str, value: dict[str, Any]) -> None:  # a run cut short keeps what it measured
        partial[key] = value
        (args.out / "result.json").write_text(json.dumps(partial, indent=1))

    print(f"warm-up on GPUs {all_dev} ...", flush=True)
    warm = eval_run(base, args.out / "warmup", all_dev, 1, args.concurrency * n, args.build_workers * n)
    keep("warmup", warm)
    print(f"  {warm['episodes']} episodes in {warm['session_wall_s']:.1f} s", flush=True)
    one = eval_run(base, args.out / "gpu1", [0], args.seeds, args.concurrency, args.build_workers)
    keep("one_gpu", one)
    print(f"1 GPU : {one['episodes']} episodes in {one['session_wall_s']:.1f} s -> {one['episodes_per_gpu_hour']:.0f} /GPU-hour "
          f"{one['best_status_counts']}", flush=True)
    many = eval_run(base, args.out / f"gpu{n}", all_dev, args.seeds * n, args.concurrency * n, args.build_workers * n)
    print(f"{n} GPUs: {many['episodes']} episodes in {many['session_wall_s']:.1f} s -> {many['episodes_per_gpu_hour']:.0f} /GPU-hour "
          f"{many['best_status_counts']}", flush=True)
    ratio = many["episodes_per_gpu_hour"] / one["episodes_per_gpu_hour"]
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() and not args.cpu_slots else "cpu slots"
    result = {"benchmark": "eval_multi_gpu", "device": device, "gpus": n, "warmup": warm,
              "one_gpu": one, "all_gpus": many, "per_gpu_ratio": ratio, "target": ">= 0.90",
              "cpu_count": os.cpu_count()}
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    print(f"per-GPU throughput, {n} GPUs / 1 GPU: {ratio:.3f} (target >= 0.90)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
