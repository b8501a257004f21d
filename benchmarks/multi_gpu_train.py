"""`cuda-agent train` under the `deepspeed` launcher on N GPUs: PPO steps, checkpoint, kill, resume.

1. ``full``: ``configs/train/gpu2_toy_ppo.yaml`` run to the end, uninterrupted.
2. ``cut``: the same command, SIGKILLed (the launcher's whole process group)
   as soon as the first checkpoint after step 2 is complete, then the same
   command again, which resumes from that checkpoint.
3. The final actors of both are compared tensor by tensor (max abs diff; equal
   or not), and the per-step metrics (reward, pass rate, tokens/s) are copied
   out of ``metrics.jsonl``.

    python benchmarks/multi_gpu_train.py --gpus 2 --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "train" / "gpu2_toy_ppo.yaml"
STAGE = "0_ppo_agentic"


def launch_cmd(gpus: int, run_dir: Path, port: int, overrides: list[str]) -> list[str]:
    """The deepspeed launcher command line (no --local_rank argument: ranks read LOCAL_RANK)."""
    extra = [x for o in overrides for x in ("-o", o)]
    return ["deepspeed", "--num_gpus", str(gpus), "--master_port", str(port), "--no_local_rank", "--module",
            "cuda_agent.cli", "train", "-c", str(CONFIG), "-o", f"run_dir={run_dir}", *extra]


def run(gpus: int, run_dir: Path, port: int, log: Path, overrides: list[str],
        kill_after_step: int | None = None) -> dict[str, Any]:
    """Run the launcher; with ``kill_after_step`` SIGKILL it once that step's checkpoint is complete."""
    t0 = time.perf_counter()
    with log.open("a") as fh:
        proc = subprocess.Popen(launch_cmd(gpus, run_dir, port, overrides), cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
        killed_at = None
        while proc.poll() is None:
            if kill_after_step is not None:
                done = sorted(run_dir.glob(f"{STAGE}/checkpoints/step_*/COMPLETE"))
                steps = [int(p.parent.name.split("_")[1]) for p in done]
                if steps and max(steps) >= kill_after_step:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    killed_at = max(steps)
                    break
            time.sleep(0.2)
    return {"rc": proc.returncode, "wall_s": time.perf_counter() - t0, "killed_after_checkpoint": killed_at}


def final_actor(run_dir: Path) -> dict[str, Any]:
    """The exported actor's tensors (safetensors)."""
    from safetensors.torch import load_file

    out = json.loads((run_dir / STAGE / "outputs.json").read_text())
    files = sorted(Path(out["actor"]).glob("*.safetensors"))
    tensors: dict[str, Any] = {}
    for f in files:
        tensors.update(load_file(str(f)))
    return tensors


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Per-step metric rows of the stage."""
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    keep = ("step", "reward_mean", "pass_rate", "tokens_per_s", "kl", "entropy", "value_loss", "step_s")
    return [{k: r[k] for k in keep if k in r} for r in rows]


def main() -> int:
    """Full run, killed run + resume, comparison; prints and writes result.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=2, help="GPUs (launcher --num_gpus).")
    ap.add_argument("--out", type=Path, required=True, help="Output folder.")
    ap.add_argument("--kill-after-step", type=int, default=2, help="Kill once a checkpoint at or after this step is complete.")
    ap.add_argument("-o", "--override", action="append", default=[], help="Config override for every run (KEY=VALUE).")
    args = ap.parse_args()
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    full_dir, cut_dir = args.out / "full", args.out / "cut"
    res: dict[str, Any] = {"benchmark": "multi_gpu_train", "gpus": args.gpus, "config": str(CONFIG.relative_to(REPO)),
                           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
    res["full"] = run(args.gpus, full_dir, 29611, args.out / "full.log", args.override)
    print(f"full run: rc {res['full']['rc']} in {res['full']['wall_s']:.1f} s", flush=True)
    res["cut"] = run(args.gpus, cut_dir, 29612, args.out / "cut.log", args.override,
                     kill_after_step=args.kill_after_step)
    print(f"cut run: killed after checkpoint {res['cut']['killed_after_checkpoint']} at {res['cut']['wall_s']:.1f} s", flush=True)
    res["resume"] = run(args.gpus, cut_dir, 29613, args.out / "cut.log", args.override)
    print(f"resumed: rc {res['resume']['rc']} in {res['resume']['wall_s']:.1f} s", flush=True)
    if res["full"]["rc"] == 0 and res["resume"]["rc"] == 0:
        a, b = final_actor(full_dir), final_actor(cut_dir)
        diffs = {k: float((a[k].float() - b[k].float()).abs().max()) for k in a if k in b}
        res["same_keys"] = a.keys() == b.keys()
        res["max_abs_diff"] = max(diffs.values()) if diffs else None
        res["bit_identical"] = res["same_keys"] and all(torch.equal(a[k], b[k]) for k in a)
        res["metrics_full"], res["metrics_resumed"] = metrics(full_dir), metrics(cut_dir)
        print(f"resumed vs uninterrupted actor: bit-identical={res['bit_identical']} max|diff|={res['max_abs_diff']}")
        for row in res["metrics_full"]:
            print("  ", row)
    (args.out / "result.json").write_text(json.dumps(res, indent=1, default=str))
    ok = res["full"]["rc"] == 0 and res["resume"]["rc"] == 0 and res["cut"]["killed_after_checkpoint"] is not None
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
