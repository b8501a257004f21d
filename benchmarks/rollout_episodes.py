"""Kernel-environment episodes per GPU-hour: concurrent rollouts vs the sequential rollout code.

    python benchmarks/rollout_episodes.py --data /tmp/learning_curve/data --model /tmp/learning_curve/sft_seed0/0_sft/actor \
        --backend cuda --concurrency 16 --sequential 6 --concurrent 32 --out rollout_episodes.json

Same model, same tasks (the family's first training tasks, in order), same turn limit and sampling settings.

- sequential: the rollout loop of commit ``9149e7d`` (``training/stages/episodes.py``, still the
  ``rollout.concurrency: 1`` path): one episode after another, a batch-size-1 ``hf`` engine loaded once,
  ``run_episode`` building (and closing) a fresh backend for every episode;
- concurrent: :class:`~cuda_agent.training.stages.kernel_rollouts.ConcurrentKernelRollouts`, ``--concurrency``
  episodes in flight through eval's scheduler, generation batched across the episodes ready to generate.

Reports episodes per hour of wall time on the one device (= per GPU-hour), the ratio, and the environment's
share of episode time (1 - time waiting for generation / episode wall time), summed over episodes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_config(data: Path, backend: str, max_turns: int, harness: dict[str, Any] | None) -> Any:
    """The family's agent-loop config."""
    from cuda_agent.config import RunConfig
    from cuda_agent.training.kernel_family.corpus import family_run_settings

    cfg = {**family_run_settings(data, backend, max_turns), "policy": "scripted"}
    if harness:
        cfg["plugins"] = {backend: {"harness": harness}}
    return RunConfig.model_validate(cfg)


def sequential(tasks: list[Any], cfg: Any, model: Path, out: Path, params: Any, device: str) -> dict[str, float]:
    """The 9149e7d loop: one hf engine (batch 1), one episode at a time, a fresh backend per episode."""
    from transformers import AutoTokenizer

    from cuda_agent.loop import run_episode
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine
    from cuda_agent.training.rollout.token_policy import EngineTokenPolicy
    from cuda_agent.training.stages.kernel_rollouts import _turn_timings

    tok = AutoTokenizer.from_pretrained(model)
    engine = HFRolloutEngine(model, tok, device=device, dtype="float32", batch_size=1)
    pm = PluginManager()
    cfg = cfg.model_copy(deep=True)
    cfg.policy = f"hf:{model}"
    policy_s = episode_s = 0.0
    t0 = time.monotonic()
    for i, task in enumerate(tasks):
        policy = EngineTokenPolicy(engine, tok, params.model_copy(update={"seed": i}))
        s = time.monotonic()
        run_episode(task, config=cfg, plugin_manager=pm, out_dir=out / f"{i:03d}", policy=policy)
        episode_s += time.monotonic() - s
        policy_s += _turn_timings(out / f"{i:03d}").get("policy_s", 0.0)
    wall = time.monotonic() - t0
    return {"episodes": float(len(tasks)), "wall_s": wall, "episodes_per_hour": len(tasks) * 3600 / wall,
            "env_share": 1 - policy_s / episode_s if episode_s else 0.0, "times": episode_times(out, len(tasks))}


def episode_times(out: Path, n: int) -> dict[str, float]:
    """Mean seconds per episode by where they went (policy, each tool, final grading), tokens per turn, statuses."""
    from cuda_agent.training.stages.heldout import episode_record, time_summary

    recs = [episode_record(out / f"{i:03d}") for i in range(n)]
    times = time_summary(recs)
    for r in recs:
        times[f"status_{r['status']}"] = times.get(f"status_{r['status']}", 0) + 1
    return times


def concurrent(tasks: list[Any], cfg: Any, model: Path, out: Path, params: Any, device: str, concurrency: int,
               build_workers: int, device_steps: int = 1, batching: str = "batch") -> dict[str, float]:
    """ConcurrentKernelRollouts over the same tasks (backends start inside the measured time); ``batching``:
    ``rollout.batching`` (batch or continuous generation)."""
    from cuda_agent.plugin_manager import PluginManager
    from cuda_agent.training.settings import RolloutSettings
    from cuda_agent.training.stages.kernel_rollouts import ConcurrentKernelRollouts, EpisodeJob

    settings = RolloutSettings(concurrency=concurrency, build_workers=build_workers, device_steps=device_steps,
                               max_batch=64, gather_s=0.05, batching=batching)
    runner = ConcurrentKernelRollouts(cfg, PluginManager(), settings, device)
    jobs = [EpisodeJob(t, out / f"{i:03d}", i) for i, t in enumerate(tasks)]
    try:
        t0 = time.monotonic()
        stats = runner.run(jobs, model, params)
        wall = time.monotonic() - t0
        batching = runner._batching.stats.as_dict() if runner._batching is not None else {}
    finally:
        runner.close()
    row = {"batching": batching, "episodes": float(len(jobs)), "wall_s": wall, "episodes_per_hour": len(jobs) * 3600 / wall,
           "env_share": stats.as_dict()["rollout_env_share"], **stats.as_dict(), **batching,
           "times": episode_times(out, len(jobs))}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="kernel family data folder (tasks, system prompt)")
    ap.add_argument("--model", type=Path, required=True, help="policy folder (HF format with tokenizer)")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--build-workers", type=int, default=6)
    ap.add_argument("--device-steps", type=int, default=1, help="device steps at once (rollout.device_steps)")
    ap.add_argument("--sequential", type=int, default=6, help="episodes of the sequential run")
    ap.add_argument("--concurrent", type=int, default=32, help="episodes of the concurrent run")
    ap.add_argument("--batching", choices=["batch", "continuous", "both"], default="batch",
                    help="generation of the concurrent run (rollout.batching); 'both': a continuous run, then a "
                         "batch one over the same tasks (reported as concurrent_continuous and concurrent)")
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=1100)
    ap.add_argument("--work", type=Path, default=Path("/tmp/rollout_episodes"))
    ap.add_argument("--out", type=Path, default=Path("rollout_episodes.json"))
    args = ap.parse_args()

    import torch

    from cuda_agent.protocols import SamplingParams
    from cuda_agent.training.stages.episodes import load_tasks

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from learning_curve import HARNESS

    device = "cuda" if torch.cuda.is_available() else "cpu"
    import shutil

    for part in ("sequential", "concurrent_batch", "concurrent_continuous"):  # an earlier run's episode folders (a layout needs fresh ones)
        shutil.rmtree(args.work / part, ignore_errors=True)
    tasks = load_tasks([str(args.data / "tasks_train.jsonl")], args.backend)
    cfg = run_config(args.data, args.backend, args.max_turns, HARNESS)
    params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=0)
    n = max(args.sequential, args.concurrent)
    tasks = (tasks * (n // len(tasks) + 1))[:n]
    result: dict[str, Any] = {"backend": args.backend, "concurrency": args.concurrency,
                              "device_steps": args.device_steps, "partial": True,
                              "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    if args.sequential:
        seq = sequential(tasks[: args.sequential], cfg, args.model, args.work / "sequential", params, device)
        print(f"sequential: {seq['episodes_per_hour']:.1f} episodes/h (env share {seq['env_share']:.2f})", flush=True)
        result["sequential"] = seq
        args.out.write_text(json.dumps(result, indent=1))
    # 'both': the continuous run first (a run cut by a deadline keeps the newer figure), then the batch one
    modes = ["continuous", "batch"] if args.batching == "both" else [args.batching]
    for mode in modes:
        con = concurrent(tasks[: args.concurrent], cfg, args.model, args.work / f"concurrent_{mode}", params, device,
                         args.concurrency, args.build_workers, args.device_steps, mode)
        print(f"concurrent x{args.concurrency} ({mode}): {con['episodes_per_hour']:.1f} episodes/h "
              f"(env share {con['env_share']:.2f}, policy {con['times'].get('policy_s_mean', 0):.1f} s per episode)",
              flush=True)
        result["concurrent" if mode == "batch" or len(modes) == 1 else f"concurrent_{mode}"] = con
        args.out.write_text(json.dumps(result, indent=1))
    if "sequential" in result:
        result["speedup"] = result["concurrent"]["episodes_per_hour"] / result["sequential"]["episodes_per_hour"]
        print(f"speedup {result['speedup']:.2f}x")
    if len(modes) == 2:
        result["continuous_vs_batch"] = (result["concurrent_continuous"]["episodes_per_hour"]
                                         / result["concurrent"]["episodes_per_hour"])
        print(f"continuous vs batch: {result['continuous_vs_batch']:.2f}x")
    result["partial"] = False
    args.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
