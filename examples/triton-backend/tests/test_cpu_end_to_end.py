"""The Triton backend end to end on a machine without a GPU (Triton's interpreter inside cuda-agent's sandbox):
each runtime cheat fails verify with its status, ReLU-as-identity fails grading on widened inputs, ``cuda-agent
run`` and ``eval`` grade the scripted example solutions, and ``score`` accepts KernelBench's Triton single file."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from triton_cheats import GRADING, RELU_TASK, RUNTIME
from triton_support import EXAMPLE_TASKS, PACKAGE, TASKS, honest

from cuda_agent.cli import main as cli_main

pytestmark = pytest.mark.slow
# Quick timing and no torch.compile baseline: these tests assert statuses, and a CPU inductor compile costs seconds a task.
QUICK = ["-o", "plugins.triton.device=cpu", "-o", "plugins.triton.harness.timing.preset=quick",
         "-o", "plugins.triton.harness.timing.compile_baseline=false"]


@pytest.mark.parametrize("name", sorted(RUNTIME))
def test_runtime_cheats_fail_verify_with_their_status(cpu_backend, probed, tmp_path, name):
    threat, source, status = RUNTIME[name]
    ws = cpu_backend.prepare_workspace(probed("swish"), tmp_path / "ws")
    ws.write("model_new.py", source)
    result = cpu_backend.verify(ws, probed("swish"))
    assert result.status.value == status, (threat, result.status, result.rule, result.message[:300])
    if status == "rejected":
        assert result.rule.startswith(f"T{threat}."), result.rule


def test_relu_as_identity_passes_verify_and_fails_grading(cpu_backend, tmp_path):
    from cuda_agent.harness.tasks import load_task_code

    task = load_task_code(RELU_TASK, "examples/relu_nonnegative")
    _, source, status = GRADING["relu_as_identity"]
    ws = cpu_backend.prepare_workspace(task, tmp_path / "ws")
    ws.write("model_new.py", source)
    assert cpu_backend.verify(ws, task).status.value == "correct"  # the task's own inputs are never negative
    graded = cpu_backend.grade(ws, task)
    assert graded.status.value == status and graded.diagnostics.widened is not None, graded.message[:300]


def test_run_grades_a_scripted_episode(tmp_path):
    out = tmp_path / "run"
    rc = cli_main(["run", str(TASKS / "swish.py"), "--backend", "triton", "--out", str(out),
                   "--policy", f"scripted:{PACKAGE / 'trajectories' / 'swish.yaml'}", *QUICK])
    assert rc == 0
    result = json.loads((out / "result.json").read_text())
    assert result["graded"]["status"] == "correct" and result["graded"]["provenance"]["backend"] == "triton"
    tools = [r["phase"] for r in result.get("turn_results", [])] if "turn_results" in result else None
    assert tools is None or {"compile", "verify", "profile"} <= set(tools)


def test_eval_grades_every_example_task(tmp_path):
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name in EXAMPLE_TASKS:  # write the solution, finish: the grading pass is what counts
        actions = [{"text": "write", "tool_calls": [{"name": "write_file", "arguments": {
                    "path": "model_new.py", "content": honest(name)["model_new.py"]}}]},
                   {"text": "done", "tool_calls": [{"name": "finish"}]}]
        (scripts / f"{name}.yaml").write_text(yaml.safe_dump(actions))
    out = tmp_path / "eval"
    rc = cli_main(["eval", "--tasks", str(TASKS), "--policy", f"scripted:{scripts}/{{task_name}}.yaml",
                   "--backend", "triton", "--turns", "3", "--out", str(out), "--concurrency", "2",
                   "-o", "eval.hidden=false", "-o", "eval.progress=false", *QUICK])
    assert rc == 0
    report = json.loads((out / "report" / "report.json").read_text())
    run = report["runs"][0]
    rows = {r["task_id"].split("/")[-1]: r for r in run["episodes"]}
    assert sorted(rows) == sorted(EXAMPLE_TASKS)
    for name, row in rows.items():
        assert row["selections"]["final"]["regraded"] == "correct", (name, row)


def test_score_accepts_kernelbench_triton_single_files(tmp_path):
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    shutil.copy(PACKAGE / "solutions" / "row_sum" / "model_new.py", solutions / "row_sum.py")
    cheat = RUNTIME["return_the_input"][1]
    (solutions / "swish.py").write_text(cheat)
    out = tmp_path / "score"
    rc = cli_main(["score", str(solutions), "--tasks", str(TASKS), "--backend", "triton", "--out", str(out), *QUICK])
    report = json.loads((out / "report.json").read_text())
    rows = {r["task"]: r for r in report["tasks"]}
    assert rc == 1 and rows["row_sum"]["status"] == "correct" and rows["row_sum"]["kind"] == "single_file"
    assert rows["swish"]["status"] == "rejected" and rows["swish"]["rule"].startswith("T19.")
    assert report["summary"]["backend"] == "triton"


def test_score_accepts_a_kernelbench_run_folder_at_reduced_sizes(tmp_path):
    from triton_support import REPO

    out = tmp_path / "kb"
    rc = cli_main(["score", str(PACKAGE / "kernelbench"), "--tasks", f"kernelbench:{REPO / 'tests' / 'kernelbench' / 'data'}"
                   "?sizes=reduced", "--backend", "triton", "--out", str(out), "--only", "level_1_problem_19_sample_0_kernel",
                   "--only", "level_1_problem_23_sample_0_kernel", *QUICK])
    report = json.loads((out / "report.json").read_text())
    assert rc == 0, [(r["task"], r["status"], r["message"][:300]) for r in report["tasks"]]
    assert report["summary"]["kernelbench"]["fast_p"]["fast_0"] == 1.0
    assert all(r["kernelbench"]["sizes"] == "reduced" for r in report["tasks"])
