"""The pipeline end to end: outputs, resumability after SIGKILL, the CI acceptance build, the LLM composer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from cuda_agent.config import load_config
from cuda_agent.hookspecs import hookimpl
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.messages import PolicyOutput
from cuda_agent.training.synthesis.compose_llm import ComposeError, LLMComposer, parse_task_module, render_prompt
from cuda_agent.training.synthesis.config import DataConfig
from cuda_agent.training.synthesis.execution_probe import SCRATCH_PREFIX, sweep_orphaned_scratch
from cuda_agent.training.synthesis.pipeline import DataPipeline

REPO = Path(__file__).resolve().parents[2]
CI_CONFIG = REPO / "configs" / "data" / "ci.yaml"

pytestmark = pytest.mark.slow  # real probe workers and torch runs


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _small_config(out_dir: Path, catalog: Path, **extra) -> Path:
    data = yaml.safe_load(CI_CONFIG.read_text())
    data.update({"out_dir": str(out_dir), "target_tasks": 8, "round_size": 5, "max_candidates": 25, "progress": False})
    data["mine"] = {"catalog": str(catalog)}
    data["probe"]["compile_backend"] = "eager"  # Dynamo capture only: keeps this multi-build test affordable
    data.update(extra)
    path = out_dir.parent / f"{out_dir.name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_build_resumes_after_sigkill_with_the_same_result(tmp_path: Path, catalog_path: Path):
    straight_cfg = _small_config(tmp_path / "straight", catalog_path)
    summary = DataPipeline(load_config(DataConfig, [straight_cfg])).build()
    assert summary["kept"] >= 8

    killed_cfg = _small_config(tmp_path / "killed", catalog_path)
    cmd = [sys.executable, "-m", "cuda_agent.cli", "data", "build", "-c", str(killed_cfg), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=tmp_path)
    assert proc.stdout is not None
    for line in proc.stdout:  # blocks on the build's own output: kill right after its first round
        if "round done" in line:
            break
    assert '"dropped"' in line and '"elapsed_s"' in line, line  # long builds report drop reasons per round
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    out = tmp_path / "killed"
    first_round = len(_rows(out / "filtered.jsonl"))
    assert 0 < first_round < len(_rows(tmp_path / "straight" / "filtered.jsonl"))
    # The killed build could not drop its probe workers' scratch folders ...
    orphans = list(Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}{proc.pid}-*"))
    assert orphans

    resumed = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert not [p for p in orphans if p.exists()]  # ... the resumed one did
    for name in ("composed.jsonl", "filtered.jsonl"):
        ids = [r["id"] for r in _rows(out / name)]
        assert len(ids) == len(set(ids)), f"duplicates in {name}"
    key = lambda r: (r["id"], r["code"], r["ops"], r["verdicts"])  # noqa: E731 - timings differ run to run
    assert [key(r) for r in _rows(out / "tasks.jsonl")] == [key(r) for r in _rows(tmp_path / "straight" / "tasks.jsonl")]
    drop = lambda r: (r["id"], r["reason"])  # noqa: E731
    assert [drop(r) for r in _rows(out / "dropped.jsonl")] == [drop(r) for r in _rows(tmp_path / "straight" / "dropped.jsonl")]


def test_scratch_folders_of_dead_makers_are_swept_and_no_others(tmp_path: Path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid no process has now (reused pids keep their folders: only a missed clean-up)
    dead = tmp_path / f"{SCRATCH_PREFIX}{gone.pid}-abc"
    ours = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-abc"
    legacy = tmp_path / f"{SCRATCH_PREFIX}abcdefgh"  # no maker in the name: left alone
    outside = tmp_path / "kept"
    for folder in (dead, ours, legacy, outside):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "f.txt").write_text("x")
    (dead / "link").symlink_to(outside)  # removed as a link; what it points to stays
    assert sweep_orphaned_scratch(tmp_path) == 1
    assert not dead.exists() and ours.exists() and legacy.exists() and (outside / "sub" / "f.txt").exists()


def test_ci_build_from_scratch_meets_the_issue_bar(tmp_path: Path):
    out = tmp_path / "ci"
    proc = subprocess.run(["cuda-agent", "data", "build", "-c", str(CI_CONFIG), "-o", f"out_dir={out}", "--no-progress"],
                          capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    tasks = _rows(out / "tasks.jsonl")
    assert len(tasks) >= 50
    assert len({tuple(sorted(set(t["ops"]))) for t in tasks}) >= 20
    assert sum(len(t["ops"]) >= 3 for t in tasks) >= 0.3 * len(tasks)
    for t in tasks:
        assert t["source"] == "synth" and t["level"] is None and t["provenance"]["composer"] == "rules"
        assert set(t["verdicts"]) == {"runs", "deterministic", "informative", "runtime_window", "memory", "cpu_sizes"}
        assert all(v == "keep" for v in t["verdicts"].values()) and t["timings"]["eager_ms"] is not None
        assert "CPU_SIZES" in t["code"] and t["timings"]["cpu_eager_ms"] is not None
    summary = json.loads((out / "summary.json").read_text())
    dropped = _rows(out / "dropped.jsonl")
    assert summary["kept"] == len(tasks) and sum(summary["dropped_by_reason"].values()) == len(dropped)
    assert all(d["reason"] for d in dropped)
    # Every task loads in the kernel environment (the harness's sandboxed task probe), at full and at
    # CPU sizes (what the cpu backend evaluates); a spread sample keeps CI time bounded (each load is a
    # fresh sandboxed torch process).
    from cuda_agent.harness.tasks import load_task_code

    sample = tasks[:: max(1, len(tasks) // 6)]
    jobs = [(t, sizes) for t in sample for sizes in ("full", "cpu")]

    def load(job: tuple[dict, str]):
        t, sizes = job
        return load_task_code(t["code"], t["id"], source="synth", device="cpu", sizes=sizes)

    with ThreadPoolExecutor(2) as pool:
        for (t, sizes), manifest in zip(jobs, pool.map(load, jobs)):
            key = "output" if sizes == "full" else "cpu_output"
            assert [o.shape for o in manifest.outputs][0] == t["shapes"][key], (sizes, t["id"])
    # ... and the evaluation's jsonl task source reads the file.
    source = PluginManager(load_entrypoints=False).registry.build("data_source", "jsonl", {"target": str(out / "tasks.jsonl")})
    assert [m.id.rsplit("/", 1)[-1] for m in source.iter_tasks()][:3] == [t["id"].rsplit("/", 1)[-1] for t in tasks[:3]]


# --------------------------------------------------------------------------- LLM composer (fake outside service)
FAKE_TASK = '''Here is the fused task.

```python
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)) * 2.0


n = 32


def get_inputs():
    return [torch.randn(4, n)]


def get_init_inputs():
    return [n]
```
'''


class FakeLLM:
    """Stands in for a chat model behind an HTTP API: answers every prompt with FAKE_TASK, records prompts."""

    prompts: list[str] = []

    def __init__(self, answer: str = FAKE_TASK) -> None:
        self.answer = answer

    def reset(self) -> None:
        pass

    def query(self, messages, tools):
        FakeLLM.prompts.append(messages[-1].content)
        return PolicyOutput(text=self.answer)


class FakePolicyPlugin:
    @hookimpl
    def register_policies(self, register):
        register("fake-llm", FakeLLM)


def test_llm_composer_through_a_policy_plugin(tmp_path: Path, catalog_path: Path, catalog):
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("fake-llm-plugin", FakePolicyPlugin())])
    cfg = load_config(DataConfig, [_small_config(tmp_path / "llm", catalog_path)], ["composer=llm", "policy=fake-llm"])
    pipe = DataPipeline(cfg, plugin_manager=pm)
    log = pipe.compose(range(3), pipe.mine())
    recs = [log.records[f"synth/s0-{i:05d}"] for i in range(3)]
    assert all(r["error"] is None and r["provenance"]["composer"] == "llm" for r in recs)
    assert recs[0]["code"].startswith("import torch")
    assert any(op in FakeLLM.prompts[0] for op in recs[0]["ops"])  # the sampled operators are in the prompt
    ns: dict = {}
    exec(compile(recs[0]["code"], "<llm>", "exec"), ns)
    assert tuple(ns["Model"](*ns["get_init_inputs"]())(*ns["get_inputs"]()).shape) == (4, 32)


def test_llm_answers_that_are_not_tasks_are_rejected(catalog):
    with pytest.raises(ComposeError, match="get_init_inputs"):
        parse_task_module("```python\nimport torch\nclass Model: pass\ndef get_inputs(): return []\n```")
    with pytest.raises(ComposeError, match="not valid Python"):
        parse_task_module("```python\ndef broken(:\n```")
    composer = LLMComposer(catalog, FakeLLM("I cannot do that."), seed=0)
    with pytest.raises(ComposeError):
        composer.compose(0)
    prompt = render_prompt(composer.sample_ops(0), min_ms=1, max_ms=100, device="cuda")
    assert "KernelBench" in prompt and "```python" in prompt
    import jinja2

    with pytest.raises(jinja2.UndefinedError):
        render_prompt(composer.sample_ops(0), template="{{ missing_variable }}")
