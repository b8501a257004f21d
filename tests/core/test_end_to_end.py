"""`cuda-agent run` end to end through the real backends (cpu here; cuda on the GPU machine).

A scripted policy writes the honest example solution, compiles and verifies
it, then finishes; the trusted grading pass must find it correct.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cuda_agent.schemas.trajectory import load_trajectory

REPO = Path(__file__).resolve().parents[2]


def solution_script(path: Path, kind: str, task: str, tools: tuple[str, ...]) -> Path:
    sol = REPO / "examples" / "solutions" / kind / task
    writes = [{"name": "write_file", "arguments": {"path": p.relative_to(sol).as_posix(), "content": p.read_text()}}
              for p in sorted(sol.rglob("*")) if p.is_file()]
    actions = [{"text": "Writing the kernel, binding and ModelNew.", "tool_calls": writes}]
    actions += [{"tool_calls": [{"name": tool, "arguments": {}}]} for tool in tools]
    actions.append({"text": "Done.", "tool_calls": [{"name": "finish", "arguments": {}}]})
    path.write_text(yaml.safe_dump(actions))
    return path


def run_cli(tmp_path: Path, backend: str, kind: str, tools: tuple[str, ...], timeout: int) -> tuple[dict, object]:
    script = solution_script(tmp_path / "script.yaml", kind, "swish", tools)
    out = tmp_path / "run"
    env = dict(os.environ, CUDA_AGENT_PLUGINS="")
    proc = subprocess.run([sys.executable, "-m", "cuda_agent.cli", "run", str(REPO / "examples" / "tasks" / "swish.py"),
                           "--policy", f"scripted:{script}", "--backend", backend, "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads((out / "result.json").read_text()), load_trajectory(out / "trajectory.jsonl")


def check(result: dict, traj, tools: tuple[str, ...]) -> None:
    assert traj.complete and result["exit"] == "submitted"
    statuses = {r.phase: r.status.value for t in traj.turns for r in t.results}
    assert statuses == {tool: "correct" for tool in tools}, [t.observations for t in traj.turns]
    graded = result["graded"]
    assert graded["phase"] == "grade" and graded["status"] == "correct", graded
    assert result["reward"] >= 1.0 and result["reward_name"] == "milestone"


@pytest.mark.slow
def test_run_cpu_backend(tmp_path):
    tools = ("compile", "verify")
    result, traj = run_cli(tmp_path, "cpu", "cpu", tools, timeout=1500)
    check(result, traj, tools)
    assert "kernels/swish.cpp" in traj.header.task_prompt or ".cpp" in traj.header.task_prompt


@pytest.mark.gpu
@pytest.mark.slow
def test_run_cuda_backend(tmp_path):
    tools = ("compile", "verify", "profile")
    result, traj = run_cli(tmp_path, "cuda", "cuda", tools, timeout=1500)
    check(result, traj, tools)
    graded = result["graded"]
    assert graded["timing"]["median_ms"] > 0 and graded["baselines"]["eager"]["median_ms"] > 0
    assert graded["speedup_eager"] is not None and graded["isolation"] in ("bwrap", "process")
