"""The H200 run: scripted eval over the example tasks on the ``cuda`` backend, and the throughput benchmark smoke.

Written on a CPU machine; the GPU tests run with ``pytest -m gpu`` on the H200. The last test is a CPU smoke of the
throughput benchmark (ours only: the reference method needs CUDA).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cuda_agent.harness.evaluation.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_TASKS = REPO / "examples" / "tasks"
SOLUTIONS = REPO / "examples" / "solutions" / "cuda"


def cuda_scripts(dest: Path) -> Path:
    dest.mkdir()
    for task in sorted(EXAMPLE_TASKS.glob("*.py")):
        sol = SOLUTIONS / task.stem
        writes = [{"name": "write_file", "arguments": {"path": str(p.relative_to(sol)), "content": p.read_text()}}
                  for p in sorted(sol.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
        actions = [
            {"text": "write and test", "tool_calls": writes + [{"name": "compile"}, {"name": "verify"}, {"name": "profile"}]},
            {"text": "done", "tool_calls": [{"name": "finish"}]},
        ]
        (dest / f"{task.stem}.yaml").write_text(yaml.safe_dump(actions))
    return dest


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.timeout(600)  # 10 graded episodes, cold torch.compile baselines: ~4 minutes on the H200
def test_scripted_eval_over_example_tasks_on_cuda(tmp_path):
    scripts = cuda_scripts(tmp_path / "scripts")
    out = tmp_path / "eval"
    rc = cli_main(["eval", "--tasks", str(EXAMPLE_TASKS), "--policy", f"scripted:{scripts}/{{task_name}}.yaml",
                   "--backend", "cuda", "--turns", "3", "--seeds", "2", "--out", str(out), "--concurrency", "4",
                   "-o", "agent.selection=best", "-o", "eval.progress=false"])
    assert rc == 0
    report = json.loads((out / "report" / "report.json").read_text())
    run = report["runs"][0]
    n = len(list(EXAMPLE_TASKS.glob("*.py")))
    best = run["metrics"]["best"]
    assert best["n_episodes"] == 2 * n and run["episodes_unfinished"] == 0
    assert best["regraded"]["overall"]["pass_rate"] == 1.0, run["episodes"]
    assert best["regraded"]["overall"]["geomean_speedup_eager"] is not None
    assert best["hidden"]["heldout_checked"] == 2 * n
    assert best["hidden"]["heldout_false_pass_rate"] == 0.0  # honest example kernels
    assert run["queue"]["devices"]["0"]["calls"] > 0
    assert any(m["backend"] == "cuda" for m in run["provenance"]["machines"])
    print(json.dumps({k: best["regraded"]["overall"][k] for k in ("pass_rate", "faster_than_eager_rate",
                      "faster_than_compile_rate", "geomean_speedup_eager", "geomean_speedup_compile")}))


@pytest.mark.gpu
@pytest.mark.slow
def test_throughput_benchmark_smoke(tmp_path):
    out = tmp_path / "tp.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "eval_throughput.py"), "--backend", "cuda",
                           "--repeats", "2", "--reference-repeats", "1", "--limit", "1", "--out", str(out)], capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["ours"]["tasks_measured"] == 2 and data["ours"]["tasks_per_gpu_hour"] > 0
    assert data["reference"]["tasks_measured"] == 1, data["reference"]["per_task"]
    assert data["speedup_vs_reference"] > 0


@pytest.mark.slow
def test_throughput_benchmark_runs_ours_concurrently_on_cpu(tmp_path):
    """Ours through the eval runner's device pool (the CPU backend; no reference method there)."""
    out = tmp_path / "tp.json"
    tasks = tmp_path / "tasks"  # row_sum: the example task quickest to build on 2 cores (conv2d_relu took ~50 s)
    tasks.mkdir()
    (tasks / "row_sum.py").write_text((REPO / "examples" / "tasks" / "row_sum.py").read_text())
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "eval_throughput.py"), "--backend", "cpu",
                           "--tasks", str(tasks), "--repeats", "1", "--copies", "2", "--concurrency", "2", "--build-workers", "2",
                           "-o", "experiments.spare_references=0", "--diagnose", "row_sum", "--diagnose-calls", "3", "--diagnose-placements", "2",
                           "--out", str(out)],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    ours = data["ours"]
    # --diagnose: each copy's eager baseline re-timed in a diagnostics process of its own (never the trusted
    # reference process), after its grade and at the end
    pids = {r["task"]: r["diagnostics"]["info"]["pid"] for r in ours["per_task"]}
    late = ours["repeats"][0]["late_diagnostics"]
    assert set(late) == set(pids) and len(set(pids.values()) | {d["info"]["pid"] for d in late.values()}) == 4
    assert all(len(d["standard"]["placements_ms"]) == 2 and d["info"]["calls"] == 3 for d in late.values())
    assert proc.stdout.count("graded eager") == 4
    for r in ours["per_task"]:  # per baseline kind, what the reference process's timer saw of the host
        assert set(r["baseline_host"]) == {"eager", "compile"}
        assert all(s["calls"] >= r["dispersion"][k]["samples"] for k, s in r["baseline_host"].items())
    assert ours["tasks_measured"] == 2 and ours["failures"] == 0, ours["per_task"]
    assert {r["status"] for r in ours["per_task"]} == {"correct"}
    # --copies: the one task scored twice as two distinct tasks
    assert sorted(r["task"] for r in ours["per_task"]) == ["row_sum__copy0", "row_sum__copy1"]
    [rep] = ours["repeats"]
    assert rep["tasks"] == 2 and 0 < rep["device_busy_share"] <= 1
    # torch.compile's baselines compiled into the repeat's own inductor cache, not the machine's (warm) one
    assert ours["inductor_cache"] == "fresh per repeat" and rep["inductor_cache_files"] > 0
    assert ours["tasks_per_gpu_hour"] == pytest.approx(3600 * 2 / rep["wall_s"])
    for r in ours["per_task"]:  # (a round that looked again at a gap on the fresh sets adds its third of the cap)
        assert r["spot_checks"] == 12 + (12 // 3 if "first_look" in r["fresh_sets"] else 0), r["fresh_sets"]
        assert r["fresh_sets"]["calls"] >= 4 and r["grade_s"] > 0 and r["build_s"] > 0
    assert data["reference"] is None
    assert ours["settings"] == {"experiments": {"spare_references": 0}}
    for r in ours["per_task"]:  # each median with what it rests on
        assert set(r["dispersion"]) == {"candidate", "eager", "compile"}
        assert all(d["samples"] >= 3 and 0 < d["min_ms"] <= r[f"{q}_ms"] for q, d in r["dispersion"].items())


def test_throughput_benchmark_refuses_an_unknown_harness_setting(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "eval_throughput.py"), "--backend", "cpu",
                           "-o", "experiments.timing_net_overhed=true", "--out", str(tmp_path / "tp.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "timing_net_overhed" in proc.stderr and "timing_cpus" in proc.stderr  # names the valid keys
    assert not (tmp_path / "tp.json").exists()


def test_throughput_spread_of_one_measurement_is_unknown_and_counts_extra_profiles(benchmark_module):
    et = benchmark_module("eval_throughput")
    once = [{"task": "conv2d_relu", "candidate_ms": 1.0, "eager_ms": 2.0, "compile_ms": 3.0}]
    assert et.max_spread(once)["spread"] is None  # one measurement: no spread, not a spread of 0
    assert "unknown" in et.spread_text(et.max_spread(once))
    # a reference row with two extra profile runs: compile 3.0, 3.3, 3.15 -> (3.3 - 3.0) / 3.0
    ref = [{**once[0], "extra_profiles": [{"candidate_ms": 1.0, "eager_ms": 2.02, "compile_ms": 3.3},
                                          {"candidate_ms": 1.01, "eager_ms": 2.0, "compile_ms": 3.15}]}]
    worst = et.max_spread(ref)
    assert worst["task"] == "conv2d_relu" and worst["quantity"] == "compile_ms"
    assert worst["spread"] == pytest.approx(0.1)
    # copies of one task are pooled: swish__copy0 and swish__copy1 are two measurements of swish
    copies = [{"task": "swish__copy0", "candidate_ms": 0.100}, {"task": "swish__copy1", "candidate_ms": 0.102}]
    assert et.max_spread(copies) == {"spread": pytest.approx(0.02), "task": "swish", "quantity": "candidate_ms",
                                     "values": [0.100, 0.102]}


@pytest.mark.slow
def test_compile_baseline_probe_runs_fresh_processes_on_cpu(tmp_path):
    """The probe's CPU smoke mode: two fresh processes, each with its medians, kernel list and placement test."""
    out = tmp_path / "probe.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "compile_baseline_probe.py"), "--device", "cpu",
                           "--task", str(REPO / "examples" / "tasks" / "swish.py"), "--processes", "2", "--calls", "4",
                           "--bystanders", "2", "--sets", "3", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert len(report["processes"]) == 2
    assert (report["bystanders"], report["sets"]) == (2, 3) and report["eager_clone_rotated_ms_spread"] >= 0
    assert all(row["eager_clone_rotated_ms"] > 0 for row in report["processes"])
    offsets = [str(o) for o in (0, 512, 4096, 65536, 1 << 20, (2 << 20) + 512)]
    for row in report["processes"]:
        assert row["eager_ms"] > 0 and row["compile_ms"] > 0 and row["compile_kernels"]
        assert list(row["eager_by_offset_ms"]) == offsets and all(v > 0 for v in row["eager_by_offset_ms"].values())
        assert len(row["eager_by_seed_ms"]) == 4
    assert report["compile_programs"] and 0 <= report["compile_ms_spread"]
