"""Ctrl-C in a real ``cuda-agent eval`` on the CPU backend: a real SIGINT to a real subprocess.

The first SIGINT cancels the queued episode, stops the running one at its next tool call (its compile is ended
after the grace period), records neither, prints one line and exits 130; a second SIGINT stops at once; no
traceback reaches the terminal either way; the same command then runs exactly the planned episodes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TASKS = ("row_sum", "swish")


def _scripts(tmp_path: Path) -> tuple[Path, Path]:
    tasks, scripts = tmp_path / "tasks", tmp_path / "scripts"
    tasks.mkdir()
    scripts.mkdir()
    for name in TASKS:
        (tasks / f"{name}.py").write_text((REPO / "examples" / "tasks" / f"{name}.py").read_text())
        sol = REPO / "examples" / "solutions" / "cpu" / name
        writes = [{"name": "write_file", "arguments": {"path": str(p.relative_to(sol)), "content": p.read_text()}}
                  for p in sorted(sol.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
        actions = [{"text": "write", "tool_calls": writes}, {"text": "build", "tool_calls": [{"name": "compile"}]},
                   {"text": "check", "tool_calls": [{"name": "verify"}]}, {"text": "done", "tool_calls": [{"name": "finish"}]}]
        (scripts / f"{name}.yaml").write_text(yaml.safe_dump(actions))
    return tasks, scripts


def _command(tasks: Path, scripts: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "cuda_agent.cli", "eval", "--tasks", str(tasks), "--policy",
            f"scripted:{scripts}/{{task_name}}.yaml", "--backend", "cpu", "--turns", "6", "--out", str(out),
            "--concurrency", "1", "-o", "eval.hidden=false", "--no-plots",
            # statuses and the plan are asserted, not timings: quick timing, no CPU inductor compile
            "-o", "plugins.cpu.harness.timing.preset=quick", "-o", "plugins.cpu.harness.timing.compile_baseline=false"]


def _env() -> dict[str, str]:
    return {**os.environ, "CUDA_AGENT_PLUGINS": ""}


def _start_and_wait_for_a_running_compile(cmd: list[str], out: Path) -> subprocess.Popen:
    """Start the eval; return once its first episode has written two turns (its compile call is running).

    A trajectory left by an earlier interrupted run does not count: this process rewrites it from the start.
    """
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        trajs = [t for t in out.glob("episodes/*/trajectory.jsonl") if t.stat().st_mtime >= started]
        if trajs and trajs[0].read_text().count("\n") >= 3:  # header, 'write', 'build' (the compile runs next)
            return proc
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"eval ended before it was interrupted: {proc.returncode}\n{proc.stderr.read()[-3000:]}")
    proc.kill()
    pytest.fail("the first episode never reached its compile")


@pytest.mark.slow
def test_one_sigint_stops_eval_cleanly_and_resume_runs_exactly_the_plan(tmp_path):
    tasks, scripts = _scripts(tmp_path)
    out = tmp_path / "out"
    cmd = _command(tasks, scripts, out)

    proc = _start_and_wait_for_a_running_compile(cmd, out)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    stopped_after = time.monotonic() - sent
    print(f"eval stopped {stopped_after:.1f} s after one SIGINT")  # the target is within 10 s (grace 5 s + 3 s)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "Traceback" not in stdout, stderr[-3000:]
    assert stderr.count("interrupt: queued episodes cancelled") == 1
    assert "interrupted: 0 of 2 episodes done, 2 not done" in stderr
    assert stopped_after < 120  # outcome, not a timing target: it did not wait for the build or the queue
    assert not list(out.glob("episodes/*/eval.json")), "an interrupted episode was recorded as done"
    assert len(list(out.glob("episodes/*"))) == 1, "the queued episode started after the interrupt"

    proc = _start_and_wait_for_a_running_compile(cmd, out)
    proc.send_signal(signal.SIGINT)
    seen = []
    for line in proc.stderr:  # the second signal comes once the first one has been handled
        seen.append(line)
        if line.startswith("interrupt:"):
            break
    proc.send_signal(signal.SIGINT)
    stdout, rest = proc.communicate(timeout=300)
    stderr = "".join(seen) + rest
    assert proc.returncode == 130 and "stopped at once" in stderr, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]

    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 planned, 0 already done, 2 run now" in done.stdout
    episodes = sorted(p.name for p in (out / "episodes").iterdir())
    assert episodes == ["tasks--row_sum__seed0", "tasks--swish__seed0"]
    for name in episodes:
        record = json.loads((out / "episodes" / name / "eval.json").read_text())
        assert record["runner_error"] is None and record["regrades"]["best"]["status"] == "correct"
        lines = (out / "episodes" / name / "trajectory.jsonl").read_text().splitlines()
        assert [json.loads(x)["type"] for x in lines].count("header") == 1  # the partial run was cleared, not appended
