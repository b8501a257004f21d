"""kill -9 at five random points, then resume: the final report equals an uninterrupted run's.

Real runner, real agent loop, real scripted policy, real workspace store, in
a subprocess; the toy backend (tests/eval/eval_toy_backend.py) replaces kernel
builds so that ~70 backend calls cost milliseconds. The process kills
itself with SIGKILL at its n-th backend call, n drawn from a seeded RNG.

Compared fields (timing-independent): per episode the exit, turn count and,
for every selection mode, the selected turn and snapshot, the in-trajectory
and regraded statuses; plus the regraded metric blocks (the toy backend's
speedups are deterministic). Wall-clock and queue numbers differ between
runs by nature and are not compared.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cuda_agent.harness.evaluation.report import DETERMINISTIC_EPISODE_FIELDS, build_report

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "run_toy_eval.py"
TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {k}


def get_inputs():
    return [torch.rand(8, 8)]


def get_init_inputs():
    return []
'''


def write_tasks_and_scripts(root: Path, n: int = 4) -> tuple[Path, Path]:
    tasks, scripts = root / "tasks", root / "scripts"
    tasks.mkdir()
    scripts.mkdir()
    for i in range(n):
        (tasks / f"op{i}.py").write_text(TASK.format(k=i + 1))
        second = "status=incorrect" if i % 2 else "status=correct speedup=0.9"
        actions = [
            {"text": "first", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "solution.txt", "content": f"status=correct speedup={1.5 + i / 10}"}},
                {"name": "compile"}, {"name": "verify"}, {"name": "profile"}]},
            {"text": "second", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "solution.txt", "content": second}},
                {"name": "compile"}, {"name": "profile" if i % 2 == 0 else "verify"}]},
            {"text": "done", "tool_calls": [{"name": "finish"}]},
        ]
        (scripts / f"op{i}.yaml").write_text(yaml.safe_dump(actions))
    return tasks, scripts


def config(tasks: Path, scripts: Path, seeds: int = 2) -> dict:
    return {
        "backend": "toy",
        "policy": f"scripted:{scripts}/{{task_name}}.yaml",
        "agent": {"max_turns": 5},
        "eval": {"tasks": f"folder:{tasks}", "seeds": seeds, "concurrency": 2, "probe": False, "progress": False},
    }


def run_driver(cfg: dict, out: Path, kill_at: int | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("TOY_KILL_AT", None)
    if kill_at is not None:
        env["TOY_KILL_AT"] = str(kill_at)
    return subprocess.run([sys.executable, str(DRIVER), json.dumps(cfg), str(out)], env=env,
                          capture_output=True, text=True, timeout=600)


def deterministic_view(out: Path) -> dict:
    run = build_report([out])["runs"][0]
    return {
        "episodes": [{k: row[k] for k in (*DETERMINISTIC_EPISODE_FIELDS, "speedups", "tokens")} for row in run["episodes"]],
        "metrics": {mode: {k: m[k] for k in ("regraded", "in_trajectory", "budget_curve", "turns_to_best", "hidden",
                                             "exits", "n_episodes", "n_tasks", "n_seeds")}
                    for mode, m in run["metrics"].items()},
        "unfinished": run["episodes_unfinished"],
    }


@pytest.mark.slow
def test_kill9_five_times_then_resume_equals_uninterrupted(tmp_path):
    tasks, scripts = write_tasks_and_scripts(tmp_path)
    cfg = config(tasks, scripts)
    reference = tmp_path / "uninterrupted"
    done = run_driver(cfg, reference)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"ran": 8, "already_done": 0, "planned": 8}

    resumed = tmp_path / "killed"
    rng = random.Random(20261129)
    kills = [rng.randint(1, 24) for _ in range(5)]
    for kill_at in kills:
        proc = run_driver(cfg, resumed, kill_at=kill_at)
        assert proc.returncode == -9, f"kill point {kill_at} was not reached: {proc.stdout[-500:]} {proc.stderr[-2000:]}"
    final = run_driver(cfg, resumed)
    assert final.returncode == 0, final.stderr[-3000:]
    stats = json.loads(final.stdout.strip().splitlines()[-1])
    assert stats["planned"] == 8 and stats["ran"] + stats["already_done"] == 8

    # never lost, never duplicated
    episodes = sorted(p.name for p in (resumed / "episodes").iterdir())
    assert episodes == sorted(p.name for p in (reference / "episodes").iterdir())
    assert len(episodes) == 8
    for name in episodes:
        lines = [json.loads(x) for x in (resumed / "episodes" / name / "trajectory.jsonl").read_text().splitlines()]
        assert [x["type"] for x in lines].count("header") == 1 and lines[-1]["type"] == "end"
        assert (resumed / "episodes" / name / "eval.json").exists()
        assert not list((resumed / "episodes" / name).glob(".eval.json.tmp*"))

    expected = deterministic_view(reference)
    assert deterministic_view(resumed) == expected
    # the scripted candidates make best and final differ on odd tasks (turn 2 breaks the solution)
    rows = {(r["task_id"], r["seed_index"]): r for r in expected["episodes"]}
    odd = rows[("tasks/op1", 0)]["selections"]
    assert odd["best"]["turn"] == 1 and odd["best"]["regraded"] == "correct"
    assert odd["final"]["turn"] == 3 and odd["final"]["regraded"] == "incorrect"
    even = rows[("tasks/op0", 1)]["selections"]
    assert even["best"]["turn"] == 1 and even["final"]["regraded"] == "correct"  # slower but correct final
    assert expected["metrics"]["best"]["regraded"]["overall"]["pass_rate"] == 1.0
    assert expected["metrics"]["final"]["regraded"]["overall"]["pass_rate"] == 0.5
    # sessions: five killed ones left no session record, the final one did
    assert len(list((resumed / "sessions").glob("*.json"))) == 1


@pytest.mark.slow
def test_resume_with_a_different_config_refuses_and_prints_the_difference(tmp_path):
    tasks, scripts = write_tasks_and_scripts(tmp_path, n=1)
    out = tmp_path / "run"
    assert run_driver(config(tasks, scripts, seeds=1), out).returncode == 0
    proc = run_driver(config(tasks, scripts, seeds=2), out)
    assert proc.returncode != 0
    assert "refusing to resume" in proc.stderr and "eval.seeds: saved 1 != now 2" in proc.stderr
