"""The cuda-agent CLI: run (real subprocesses, SIGKILL), plugins, config show, show, doctor, the command table."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cuda_agent import cli
from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.trajectory import load_trajectory

TOY_DIR = Path(__file__).parent / "toy_plugins"


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TOY_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    env["CUDA_AGENT_PLUGINS"] = ""  # no third-party entry points: the test controls what loads
    return env


def cuda_agent_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "cuda_agent.cli", *args]


def write_script(path: Path, n_turns: int, delay: float = 0.0) -> Path:
    actions = [{"tool_calls": [{"name": "write_file", "arguments": {"path": f"notes/{i}.txt", "content": "x" * 50}}],
                "delay_s": delay} for i in range(n_turns)]
    actions.append({"tool_calls": [{"name": "finish", "arguments": {}}]})
    path.write_text(yaml.safe_dump(actions))
    return path


@pytest.fixture()
def task_json(task, tmp_path) -> Path:
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    return path


def test_run_subprocess_writes_run_folder(task_json, tmp_path):
    script = write_script(tmp_path / "s.yaml", 2)
    out = tmp_path / "run"
    proc = subprocess.run(cuda_agent_cmd("-p", "toy_backend", "run", str(task_json), "--policy", f"scripted:{script}",
                                         "--backend", "toy", "--out", str(out), "-o", "agent.max_turns=10"),
                          env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "exit=submitted" in proc.stdout
    for name in ("trajectory.jsonl", "result.json", "config.json", "plugins.json", "versions.json"):
        assert (out / name).is_file(), name
    result = json.loads((out / "result.json").read_text())
    assert set(result) >= {"exit", "turns", "graded", "reward", "reward_name", "selection", "selected_snapshot_id", "wall_s", "usage"}
    assert json.loads((out / "config.json").read_text())["agent"]["max_turns"] == 10
    # the same config again: reported, not rerun; a different one: refused with the difference
    again = subprocess.run(cuda_agent_cmd("-p", "toy_backend", "run", str(task_json), "--policy", f"scripted:{script}",
                                          "--backend", "toy", "--out", str(out), "-o", "agent.max_turns=11"),
                           env=cli_env(), capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "agent.max_turns: saved 10 != now 11" in again.stderr
    # show renders it
    shown = subprocess.run(cuda_agent_cmd("show", str(out)), env=cli_env(), capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "turn 3" in shown.stdout and "submitted" in shown.stdout


@pytest.mark.slow
def test_sigkill_at_random_points_leaves_loadable_trajectory(task_json, tmp_path):
    rng = random.Random(1234)
    n_turns = 8
    script = write_script(tmp_path / "slow.yaml", n_turns, delay=0.15)
    killed_before_end = 0
    for attempt in range(3):
        out = tmp_path / f"killed{attempt}"
        kill_after_lines = rng.randint(1, n_turns)  # header + some turns
        proc = subprocess.Popen(cuda_agent_cmd("-p", "toy_backend", "run", str(task_json), "--policy", f"scripted:{script}",
                                               "--backend", "toy", "--out", str(out)),
                                env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        traj_path = out / "trajectory.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait for a condition, not a fixed time
            if traj_path.exists() and traj_path.read_bytes().count(b"\n") >= kill_after_lines:
                break
            try:
                proc.wait(timeout=0.02)
                break
            except subprocess.TimeoutExpired:
                pass
        try:
            proc.wait(timeout=rng.uniform(0, 0.15))  # a random extra moment, bounded
        except subprocess.TimeoutExpired:
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        data = traj_path.read_bytes()
        complete_lines = [json.loads(l) for l in data.split(b"\n")[:-1]]
        traj = load_trajectory(traj_path)
        assert traj.header is not None
        assert [t.turn for t in traj.turns] == [l["turn"] for l in complete_lines if l["type"] == "turn"]
        assert traj.end is None or traj.complete
        killed_before_end += traj.end is None
        # every cut of the file at a random byte keeps the complete turns and flags the tail
        for _ in range(5):
            cut = rng.randint(len(data.split(b"\n")[0]) + 1, len(data))
            part = tmp_path / f"cut{attempt}.jsonl"
            part.write_bytes(data[:cut])
            loaded = load_trajectory(part)
            whole = data[:cut].split(b"\n")
            n_complete_turns = sum(1 for l in whole[:-1] if b'"type":"turn"' in l)
            assert len(loaded.turns) == n_complete_turns
            assert loaded.truncated == (whole[-1] != b"")
    assert killed_before_end >= 1


def test_plugins_json_lists_builtins_with_hooks():
    proc = subprocess.run(cuda_agent_cmd("plugins", "--json"), env=cli_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    by_name = {p["name"]: p for p in data["plugins"]}
    assert by_name["tools.files"]["hooks"] == ["register_tools"]
    assert "tool:edit_file" in by_name["tools.files"]["components"]
    assert by_name["rewards.milestone"]["distribution"] == "cuda-agent"


def test_config_show_redacts_and_lists_unknown_keys(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("plugins:\n  openai:\n    api_key: sk-secret\nagent:\n  max_turns: 7\n")
    assert cli.main(["config", "show", "-c", str(cfg)]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["agent"]["max_turns"] == 7 and shown["plugins"]["openai"]["api_key"] == "***"
    assert cli.main(["config", "show", "-o", "agent.max_turn=3"]) == 2
    err = capsys.readouterr().err
    assert "agent.max_turn: unknown key (did you mean 'max_turns'?)" in err and "valid keys here:" in err


class BrokenCommandPlugin:
    """A plugin whose command's parser needs a package that is not installed."""

    @staticmethod
    def add_parser(subparsers):
        import cuda_agent_no_such_package_for_test  # noqa: F401

    @hookimpl
    def register_commands(self, register):
        register("broken", self.add_parser, description="needs a package that is not here")


def test_missing_command_module_is_a_clear_error(monkeypatch, capsys):
    import cuda_agent.plugin_manager as plugin_manager

    real = plugin_manager.PluginManager

    def with_broken(*args, extra_plugins=(), **kwargs):
        return real(*args, extra_plugins=[*extra_plugins, ("broken", BrokenCommandPlugin())], **kwargs)

    monkeypatch.setattr(plugin_manager, "PluginManager", with_broken)
    try:
        status = cli.main(["broken", "x"])
    except SystemExit as exc:  # argparse's refusal of a command it does not know
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert "command 'broken' is not available" in err and "cuda_agent_no_such_package_for_test" in err
    assert "Traceback" not in err
    assert cli.main(["plugins", "--json"]) == 0  # the other commands are unaffected


def test_doctor_json(capsys):
    assert cli.main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) >= {"nvcc", "nvml", "torch", "ncu", "compute-sanitizer", "bubblewrap", "user_namespaces", "isolation"}
    assert report["isolation"] in ("bwrap", "process")
    assert report["torch"]["ok"]


def test_plugins_table_and_show_options(task, make_pm, tmp_path, capsys):
    assert cli.main(["plugins"]) == 0
    assert "tools.files" in capsys.readouterr().out
    from cuda_agent.config import RunConfig, load_config
    from cuda_agent.loop import run_episode

    actions = [{"text": "looking", "tool_calls": [{"name": "list_files", "arguments": {}}]}]
    config = load_config(RunConfig, base={"policy": "scripted", "backend": "toy", "plugins": {"scripted": {"actions": actions}}})
    run_episode(task, config=config, plugin_manager=make_pm(), out_dir=tmp_path / "r")
    assert cli.main(["show", str(tmp_path / "r"), "--turn", "1", "--prompts"]) == 0
    out = capsys.readouterr().out
    assert "system prompt" in out and "list_files" in out and "policy_exhausted" in out
    assert cli.main(["show", str(tmp_path / "nothing")]) == 2
    assert "no trajectory" in capsys.readouterr().err


@pytest.mark.gpu
def test_doctor_sees_the_gpu(capsys):
    assert cli.main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["nvml"]["ok"] and report["nvml"]["gpus"] and report["nvml"]["driver"]
    assert report["torch"]["cuda_available"] and report["torch"]["devices"]
