"""Per-turn overhead of the agent loop itself (no model, no compiler): parse, tools, snapshot, fsync.

Runs episodes with the scripted policy and a minimal in-script backend whose
evaluations are free, on workspaces of growing size, and reports the loop's
milliseconds per turn. The agent loop must stay negligible next to tool
latency (ANCHORS.md: 55-100 s per turn in the reference environment).

Usage: ``python benchmarks/loop_overhead.py [--turns 50] [--out loop_overhead.json]``.
Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from cuda_agent.config import RunConfig, load_config
from cuda_agent.harness.workspace import ConfinedWorkspace
from cuda_agent.hookspecs import hookimpl
from cuda_agent.loop import run_episode
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest


class FreeBackend:
    """Backend whose evaluations cost nothing: isolates the loop's own cost."""

    name, skill, kernel_suffix = "free", "cpu", ".cpp"

    def __init__(self, n_files: int = 10, file_kb: int = 4) -> None:
        self.n_files, self.file_kb = n_files, file_kb

    def availability(self):
        return True, "always"

    def device_facts(self):
        return {}

    def prepare_workspace(self, task, root):
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        (root / "model.py").write_text(task.code)
        for i in range(self.n_files):
            (root / "kernels").mkdir(exist_ok=True)
            (root / "kernels" / f"k{i}.cpp").write_text("x" * 1024 * self.file_kb)
        return ConfinedWorkspace(root, protected=["model.py"])

    def _ok(self, task, phase):
        return CandidateResult(task_id=task.id, phase=phase, status=Status.correct)

    def compile(self, ws, task):
        return self._ok(task, "compile")

    verify = profile = compile

    def grade(self, ws, task):
        return self._ok(task, "grade")

    def close(self):
        pass


def measure(turns: int, n_files: int, file_kb: int) -> dict:
    """Run one episode; return per-turn loop overhead figures."""
    task = TaskManifest.from_code("bench/task", "class Model: pass\n")
    actions = [{"tool_calls": [{"name": "write_file", "arguments": {"path": f"kernels/k{i % max(n_files, 1)}.cpp",
                                                                    "content": f"// turn {i}\n" + "y" * 1024 * file_kb}},
                               {"name": "read_file", "arguments": {"path": "model.py"}}]} for i in range(turns)]
    config = load_config(RunConfig, base={"policy": "scripted", "backend": "free",
                                          "plugins": {"scripted": {"actions": actions}},
                                          "agent": {"max_turns": turns + 1}})
    backend = FreeBackend(n_files, file_kb)

    class Plugin:
        @hookimpl
        def register_backends(self, register):
            register("free", lambda: backend)

    pm = PluginManager(load_entrypoints=False, extra_plugins=[("bench", Plugin())])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run_episode(task, config=config, plugin_manager=pm, out_dir=Path(tmp) / "run")
        total = time.perf_counter() - start
        lines = [json.loads(l) for l in (Path(tmp) / "run" / "trajectory.jsonl").read_text().splitlines()]
    per_turn = [t["timings"]["tools_s"] * 1e3 for t in lines if t["type"] == "turn"]
    return {"turns": turns, "files": n_files, "file_kb": file_kb, "episode_s": total,
            "ms_per_turn_total": total * 1e3 / turns, "tools_ms_median": statistics.median(per_turn)}


def main() -> None:
    """Measure and report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("loop_overhead.json"))
    args = parser.parse_args()
    rows = [measure(args.turns, n, kb) for n, kb in ((5, 4), (50, 4), (20, 64))]
    print(f"{'files':>6} {'KB/file':>8} {'ms/turn (all)':>14} {'tools ms (median)':>18}")
    for r in rows:
        print(f"{r['files']:>6} {r['file_kb']:>8} {r['ms_per_turn_total']:>14.2f} {r['tools_ms_median']:>18.2f}")
    args.out.write_text(json.dumps(rows, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
