"""H200 data build: >= 300 tasks with the 1-100 ms eager window on CUDA.

Runs ``DataPipeline(configs/data/h200.yaml).build()`` (resumable: run it again
to continue), then prints the counts per stage and drop reason and the wall
time, and writes them to ``<out_dir>/benchmark.json``.

    python benchmarks/data_build_h200.py [-o key=value ...]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cuda_agent.config import load_config
from cuda_agent.training.synthesis.config import DataConfig
from cuda_agent.training.synthesis.pipeline import DataPipeline


def main() -> None:
    """Build, then print and save the figures."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-c", "--config", default=str(Path(__file__).parent.parent / "configs/data/h200.yaml"))
    ap.add_argument("-o", "--override", action="append", default=[])
    args = ap.parse_args()
    config = load_config(DataConfig, [args.config], args.override)
    t0 = time.monotonic()
    summary = DataPipeline(config).build()
    wall = time.monotonic() - t0
    tasks = [json.loads(line) for line in (config.out_dir / "tasks.jsonl").read_text().splitlines() if line]
    eager = sorted(t["timings"]["eager_ms"] for t in tasks if t["timings"].get("eager_ms") is not None)
    figures = {
        **summary,
        "this_call_wall_s": round(wall, 1),
        "workers": config.workers,
        "eager_ms_median": eager[len(eager) // 2] if eager else None,
        "eager_ms_min": eager[0] if eager else None,
        "eager_ms_max": eager[-1] if eager else None,
    }
    print("== data build (H200) ==")
    for key in ("operators", "composed", "compose_errors", "filtered", "kept_after_filter", "kept", "distinct_op_sets", "with_3plus_ops"):
        print(f"{key:>20}: {figures.get(key)}")
    print("  dropped by reason:")
    for reason, n in figures["dropped_by_reason"].items():
        print(f"{reason:>20}: {n}")
    print(f"{'eager ms (min/med/max)':>20}: {figures['eager_ms_min']} / {figures['eager_ms_median']} / {figures['eager_ms_max']}")
    print(f"{'wall s (this call)':>20}: {figures['this_call_wall_s']}")
    (config.out_dir / "benchmark.json").write_text(json.dumps(figures, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
