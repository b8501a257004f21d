"""CUDA probe and a small H200-config build (run on the GPU machine: pytest -m gpu tests/data).

Assertion messages carry the probe report's status, message and errors (and the
build's drop reasons), so a failure on the GPU machine is diagnosable from the log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.config import load_config
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.training.synthesis.config import DataConfig
from cuda_agent.training.synthesis.execution_probe import ProbeSettings, ProbeWorker
from cuda_agent.training.synthesis.pipeline import DataPipeline

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * 2.0


n = 4096


def get_inputs():
    return [torch.randn(8192, n)]


def get_init_inputs():
    return [n]
"""

# A 4 GiB tensor made in forward on the input's device (a tensor made without a device would land on
# the CPU and never count against the CUDA allocator's peak).
BIG = TASK.replace("return torch.tanh(self.fc(x)) * 2.0",
                   "y = torch.ones(1024, 1024, 1024, device=x.device)\n        return x + y.mean()")


def diagnose(report) -> str:
    """The parts of a probe report that say what went wrong."""
    fields = ("status", "device", "eager_ok", "eager_error", "compile_ok", "compile_error", "compile_matches",
              "deterministic", "finite", "eager_ms", "peak_mem_mb", "wall_s")
    return " ".join(f"{f}={getattr(report, f)!r}" for f in fields) + f"\nmessage: {report.message[-3000:]}"


def test_probe_runs_tasks_on_the_gpu_with_inductor(tmp_path: Path):
    # Timeouts cover a cold inductor + Triton compile (20-60 s on first use); the caches go to a fresh folder.
    settings = ProbeSettings(device="cuda", compile_backend="inductor", timeout_s=300, startup_timeout_s=300,
                             compile_cache_dir=tmp_path / "inductor")
    with ProbeWorker(settings, device_index=0) as worker:
        r = worker.probe("gpu", TASK)
        print("gpu task:", diagnose(r))
        assert r.status == "ok" and r.device == "cuda", diagnose(r)
        assert r.eager_ok and r.compile_ok and r.compile_matches, diagnose(r)
        assert r.deterministic and r.finite, diagnose(r)
        assert r.eager_ms is not None and r.eager_ms > 0.05, diagnose(r)
        assert r.peak_mem_mb is not None and r.peak_mem_mb > 128, diagnose(r)  # 8192x4096 fp32 input + output
        big = worker.probe("big", BIG)
        print("big task:", diagnose(big))
    assert big.status == "ok" and big.eager_ok, diagnose(big)
    registry = PluginManager(load_entrypoints=False).registry
    task = TaskManifest.from_code("synth/big", BIG, meta={"probe": big.model_dump()})
    verdict = registry.build("task_filter", "memory", {"max_mb": 1024}).check(task, None)
    assert not verdict.keep and verdict.measurements["peak_mem_mb"] > 1024, (verdict, diagnose(big))


def test_small_h200_build_keeps_tasks_inside_the_paper_window(tmp_path: Path):
    overrides = [f"out_dir={tmp_path / 'h200'}", "target_tasks=6", "round_size=16", "max_candidates=32", "workers=8",
                 f"probe.compile_cache_dir={tmp_path / 'inductor'}", "progress=false"]
    config = load_config(DataConfig, [REPO / "configs" / "data" / "h200.yaml"], overrides)
    summary = DataPipeline(config).build()
    print(json.dumps(summary, indent=1))
    tasks = [json.loads(line) for line in (tmp_path / "h200" / "tasks.jsonl").read_text().splitlines()]
    dropped = [json.loads(line) for line in (tmp_path / "h200" / "dropped.jsonl").read_text().splitlines()]
    reasons = "\n".join(f"{d['id']} {d['reason']}: {d['message'][:300]}" for d in dropped)
    assert summary["kept"] == len(tasks) >= 1, f"{json.dumps(summary)}\n{reasons}"
    for t in tasks:
        assert 1.0 <= t["timings"]["eager_ms"] <= 100.0, t["timings"]
        assert t["verdicts"]["cpu_sizes"] == "keep" and t["shapes"]["cpu_output"], t["shapes"]
