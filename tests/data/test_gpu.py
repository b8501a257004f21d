"""CUDA probe and a small H200-config build (run on the GPU machine: pytest -m gpu tests/data)."""

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

BIG = TASK.replace("return torch.tanh(self.fc(x)) * 2.0", "y = torch.ones(1024, 1024, 1024)\n        return x + y.mean()")


def test_probe_runs_tasks_on_the_gpu_with_inductor():
    settings = ProbeSettings(device="cuda", compile_backend="inductor", timeout_s=300)
    with ProbeWorker(settings, device_index=0) as worker:
        r = worker.probe("gpu", TASK)
        assert r.status == "ok" and r.device == "cuda", r
        assert r.eager_ok and r.compile_ok and r.compile_matches, r
        assert r.deterministic and r.finite
        assert r.eager_ms is not None and r.eager_ms > 0.05
        assert r.peak_mem_mb is not None and r.peak_mem_mb > 128  # 8192x4096 fp32 input + output on the device
        big = worker.probe("big", BIG)
    registry = PluginManager(load_entrypoints=False).registry
    task = TaskManifest.from_code("synth/big", BIG, meta={"probe": big.model_dump()})
    verdict = registry.build("task_filter", "memory", {"max_mb": 1024}).check(task, None)
    assert not verdict.keep and verdict.measurements["peak_mem_mb"] > 1024


def test_small_h200_build_keeps_tasks_inside_the_paper_window(tmp_path: Path):
    overrides = [f"out_dir={tmp_path / 'h200'}", "target_tasks=6", "round_size=16", "max_candidates=32", "workers=8",
                 f"probe.compile_cache_dir={tmp_path / 'inductor'}", "progress=false"]
    config = load_config(DataConfig, [REPO / "configs" / "data" / "h200.yaml"], overrides)
    summary = DataPipeline(config).build()
    tasks = [json.loads(line) for line in (tmp_path / "h200" / "tasks.jsonl").read_text().splitlines()]
    assert summary["kept"] == len(tasks) >= 1, summary
    for t in tasks:
        assert 1.0 <= t["timings"]["eager_ms"] <= 100.0
    print(json.dumps(summary, indent=1))
