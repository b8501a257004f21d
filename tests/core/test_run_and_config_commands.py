"""``run`` and ``config`` as a user meets them: exit statuses, Ctrl-C, --turns, overrides, validation, extras."""

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

from cuda_agent import cli
from cuda_agent.config import load_config
from cuda_agent.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TOY_DIR = Path(__file__).parent / "toy_plugins"
sys.path.insert(0, str(ROOT / "tests"))

from fakes.chat_server import FakeChatServer, Reply  # noqa: E402

#: Makes ``deepspeed`` look not installed to the process that loads it (the machine of a user without the extra).
NO_DEEPSPEED = '''import sys


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "deepspeed":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
'''


def env(*extra_paths: Path) -> dict[str, str]:
    paths = [str(p) for p in (*extra_paths, TOY_DIR)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
            "CUDA_AGENT_PLUGINS": ""}


def run_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "cuda_agent.cli", "-p", "toy_backend", "run", *args]


@pytest.fixture()
def task_json(task, tmp_path) -> Path:
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    return path


def write_script(path: Path, turns: int, delay: float = 0.0) -> Path:
    actions = [{"tool_calls": [{"name": "write_file", "arguments": {"path": f"notes/{i}.txt", "content": "x"}}],
                "delay_s": delay} for i in range(turns)]
    path.write_text(yaml.safe_dump(actions + [{"tool_calls": [{"name": "finish", "arguments": {}}]}]))
    return path


# --------------------------------------------------------------------------- run
def test_run_turns_flag_sets_the_turn_budget(task_json, tmp_path):
    script = write_script(tmp_path / "s.yaml", 6)
    out = tmp_path / "run"
    proc = subprocess.run(run_cmd(str(task_json), "--policy", f"scripted:{script}", "--backend", "toy", "--turns", "2",
                                  "--out", str(out)), env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "exit=max_turns turns=2" in proc.stdout
    assert json.loads((out / "config.json").read_text())["agent"]["max_turns"] == 2


def test_run_exits_non_zero_on_a_policy_error_without_grading_the_empty_workspace(task_json, tmp_path):
    with FakeChatServer(default=Reply(status=503), models=["m"]) as server:
        proc = subprocess.run(run_cmd(str(task_json), "--policy", f"openai:m?base_url={server.base_url}&max_attempts=1",
                                      "--backend", "toy", "--out", str(tmp_path / "run")),
                              env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "exit=policy_error" in proc.stdout and "not graded" in proc.stdout and "compile_error" not in proc.stdout
    assert "error: the episode ended in policy_error" in proc.stderr
    assert json.loads((tmp_path / "run" / "result.json").read_text())["graded"] is None


def test_run_stops_on_one_sigint_and_the_same_command_runs_it_again(task_json, tmp_path):
    script = write_script(tmp_path / "slow.yaml", 40, delay=0.25)
    out = tmp_path / "run"
    cmd = run_cmd(str(task_json), "--policy", f"scripted:{script}", "--backend", "toy", "--out", str(out),
                  "-o", "agent.max_turns=100")
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    traj = out / "trajectory.jsonl"
    deadline = time.monotonic() + 300
    while not (traj.exists() and traj.read_text().count("\n") >= 3) and time.monotonic() < deadline:
        try:
            proc.wait(timeout=0.05)
            pytest.fail(f"run ended before the interrupt: {proc.stderr.read()[-2000:]}")
        except subprocess.TimeoutExpired:
            pass
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "interrupted:" in stderr and "unfinished" in stderr
    assert not (out / "result.json").exists()
    lines = [json.loads(x) for x in traj.read_text().splitlines()]
    assert lines[-1]["type"] == "turn" and len(lines) < 41  # stopped at a tool boundary, long before the end
    again = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "exit=submitted turns=41" in again.stdout
    assert [json.loads(x)["type"] for x in traj.read_text().splitlines()].count("header") == 1


# --------------------------------------------------------------------------- config
def test_overrides_address_list_items():
    from cuda_agent.training.config import TrainConfig

    paper = ROOT / "configs" / "train" / "paper.yaml"
    assert "stages.0.config.tasks=[" in paper.read_text()  # the form the file's own comment suggests
    try:
        config = load_config(TrainConfig, [paper], ["stages.0.config.tasks=[data/ops6k.jsonl]", "stages.1.id=second"])
    except ConfigError as exc:
        raise AssertionError(f"a list item could not be addressed: {exc}") from exc
    assert config.stages[0].config["tasks"] == ["data/ops6k.jsonl"] and config.stages[1].id == "second"
    with pytest.raises(ConfigError, match=r"stages has \d+ item\(s\); index 99 is out of range"):
        load_config(TrainConfig, [paper], ["stages.99.config.tasks=[a]"])
    with pytest.raises(ConfigError, match=r"stages is a list; address an item by its index"):
        load_config(TrainConfig, [paper], ["stages.first.config.tasks=[a]"])


@pytest.mark.parametrize("override, message", [
    ("backend=nope", "unknown backend 'nope' (at backend); valid backends: cpu, cuda"),
    ("reward=nope", "unknown reward 'nope'"),
    ("policy=nope:x", "unknown policy 'nope'"),
    ("disable=[milestone]", "config selects 'milestone' at 'reward' but also disables it"),
    ("plugins.milestone.treshold=2", "invalid config for reward 'milestone' (block plugins.milestone)"),
    ("plugins.milestone.threshold=fast", "threshold"),
    ("plugins.nosuch.x=1", "config block plugins.nosuch names no registered component"),
])
def test_config_show_refuses_what_a_run_would_refuse(override, message, capsys):
    assert cli.main(["config", "show", "-o", override]) == 2
    assert message in capsys.readouterr().err


def test_config_show_prints_plugin_defaults(capsys):
    assert cli.main(["config", "show", "-o", "plugins.milestone.threshold=1.1", "-o", "policy=openai:m"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    milestone, openai = shown["plugins"]["milestone"], shown["plugins"].get("openai", {})
    assert milestone["threshold"] == 1.1 and milestone.get("incorrect") == -1.0
    assert openai.get("max_attempts") == 6 and openai.get("model") == "m"
    assert "harness" in shown["plugins"].get("cpu", {})  # the backend's whole block, defaults filled in


def test_a_missing_extra_is_one_line_naming_it(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(NO_DEEPSPEED)
    proc = subprocess.run([sys.executable, "-m", "cuda_agent.cli", "train", "-c", str(ROOT / "configs" / "train" / "paper.yaml")],
                          env=env(tmp_path), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: cuda-agent train: needs the 'deepspeed' package, which is not installed: pip install 'cuda-agent[train]'"]


@pytest.mark.slow
def test_data_build_stops_on_one_sigint_without_a_traceback(tmp_path):
    """A command with no cooperative stop: it unwinds, its probe workers are ended, it exits 130."""
    cmd = [sys.executable, "-m", "cuda_agent.cli", "data", "build", "-c", str(ROOT / "configs" / "data" / "ci.yaml"),
           "-o", f"out_dir={tmp_path / 'data'}"]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    seen = []
    for line in proc.stderr:  # the pipeline is under way once it has mined its operators (probes come next)
        seen.append(line)
        if "mined operators" in line:
            break
    assert proc.poll() is None, "".join(seen)[-3000:]
    proc.send_signal(signal.SIGINT)
    stdout, rest = proc.communicate(timeout=120)
    stderr = "".join(seen) + rest
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and stderr.count("interrupt: stopping cuda-agent data") == 1
