"""Failures look like failures: refused before anything is written, errors counted, retried, and exit reasons shown.

The eval toy backend stands for the device (instant verdicts); the runner, the loop, the openai policy and the
report are real, and the chat server that goes down is the local fake of an outside endpoint.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from cuda_agent import cli  # noqa: E402
from fakes.chat_server import FakeChatServer, Reply  # noqa: E402

TASK = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n" \
       "def get_inputs():\n    return [torch.rand(4)]\n\n\ndef get_init_inputs():\n    return []\n"

UNUSABLE = '''
from cuda_agent.hookspecs import hookimpl
from eval_toy_backend import ToyBackend


class Unusable(ToyBackend):
    name = "unusable"

    def availability(self):
        return False, "no ACME accelerator attached"


@hookimpl
def register_backends(register):
    register("unusable", Unusable)
'''


@pytest.fixture()
def tasks(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    for name in ("double_a", "double_b"):
        (folder / f"{name}.py").write_text(TASK)
    return folder


def script(tmp_path: Path, words: str = "status=correct speedup=2") -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "solution.txt", "content": words}},
                        {"name": "profile"}]},
        {"tool_calls": [{"name": "finish"}]}]))
    return path


def eval_args(tasks: Path, out: Path, policy: str, *extra: str) -> list[str]:
    return ["-p", "eval_toy_backend", "eval", "--tasks", str(tasks), "--policy", policy, "--backend", "toy",
            "--turns", "3", "--out", str(out), "-o", "eval.probe=false", "-o", "eval.progress=false", "--no-plots", *extra]


def test_a_wrong_tasks_path_leaves_nothing_behind_and_the_corrected_command_runs(tmp_path, tasks, capsys):
    out = tmp_path / "out"
    policy = f"scripted:{script(tmp_path)}"
    assert cli.main(eval_args(tmp_path / "no_such_tasks", out, policy)) == 2
    assert "no_such_tasks" in capsys.readouterr().err
    assert not out.exists()
    assert cli.main(eval_args(tasks, out, policy)) == 0
    assert "2 planned, 0 already done, 2 run now" in capsys.readouterr().out
    # a bare resume uses the saved config: nothing in it was a secret, so nothing stops it
    assert cli.main(["-p", "eval_toy_backend", "eval", "--out", str(out), "--no-plots"]) == 0
    assert "2 planned, 2 already done, 0 run now" in capsys.readouterr().out


def test_an_unknown_policy_is_refused_before_any_episode(tmp_path, tasks, capsys):
    out = tmp_path / "out"
    assert cli.main(eval_args(tasks, out, "scriptd:x.yaml")) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'scriptd'" in err and "valid policies:" in err and "scripted" in err
    assert not out.exists()


def test_a_bad_policy_parameter_is_refused_before_any_episode(tmp_path, tasks, capsys):
    out = tmp_path / "out"
    assert cli.main(eval_args(tasks, out, "openai:m?temprature=0.2")) == 2
    assert "temprature" in capsys.readouterr().err
    assert not out.exists()


def test_an_unusable_backend_is_refused_before_any_episode(tmp_path, tasks, capsys, monkeypatch):
    (tmp_path / "unusable_backend.py").write_text(UNUSABLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    args = eval_args(tasks, out, f"scripted:{script(tmp_path)}")
    args[args.index("--backend") + 1] = "unusable"
    assert cli.main(["-p", "unusable_backend", *args]) == 2
    assert "backend 'unusable' is not usable here: no ACME accelerator attached" in capsys.readouterr().err
    assert not out.exists()


def test_episodes_lost_to_a_server_that_was_down_are_errors_and_retry_errors_reruns_them(tmp_path, tasks, capsys):
    out = tmp_path / "out"
    write = Reply('<tool_call>{"name": "write_file", "arguments": {"path": "solution.txt", '
                  '"content": "status=correct speedup=2"}}</tool_call>')
    with FakeChatServer(default=Reply(status=503), models=["m"]) as server:
        policy = f"openai:m?base_url={server.base_url}&max_attempts=1"
        assert cli.main(eval_args(tasks, out, policy)) == 1
        printed = capsys.readouterr().out
        assert "ended in errors: 2 policy error" in printed and "eval.retry_errors=true" in printed
        report = (out / "report" / "report.md").read_text()
        assert "## Exit reasons" in report and "| out | policy_error | 2 |" in report
        assert "**policy_error**: policy.query raised ChatAPIError" in report
        rows = json.loads((out / "report" / "report.json").read_text())["runs"][0]["tasks"]
        assert {r["status"] for r in rows} == {"policy_error"}
        result = json.loads(next(out.glob("episodes/*/result.json")).read_text())
        assert result["graded"] is None  # the untouched workspace was not graded as the model's compile error

        server.default = write  # the server is back
        # the same command: still errors (counted, not re-run), and still a failure
        assert cli.main(eval_args(tasks, out, policy)) == 1
        assert "0 run now" in capsys.readouterr().out
        # retry_errors runs them again
        assert cli.main(eval_args(tasks, out, policy, "-o", "eval.retry_errors=true")) == 0
    printed = capsys.readouterr().out
    assert "2 planned, 0 already done, 2 run now" in printed and "errors" not in printed
    assert {r["status"] for r in json.loads((out / "report" / "report.json").read_text())["runs"][0]["tasks"]} \
        == {"no correct candidate"}


def test_budget_points_are_trusted_regrades_not_the_agents_own_timings(tmp_path, tasks, capsys):
    """The agent's own profile says 1.5x then 2x; the trusted grading pass measures 0.9x then 1.2x."""
    path = tmp_path / "optimistic.yaml"
    path.write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "solution.txt",
                                                              "content": "status=correct speedup=1.5 graded_speedup=0.9"}},
                        {"name": "profile"}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "solution.txt",
                                                              "content": "status=correct speedup=2 graded_speedup=1.2"}},
                        {"name": "profile"}]},
        {"tool_calls": [{"name": "finish"}]}]))
    out = tmp_path / "out"
    args = eval_args(tasks, out, f"scripted:{path}")
    args[args.index("--turns") + 1] = "4"
    assert cli.main(args) == 0
    record = json.loads(next(out.glob("episodes/*/eval.json")).read_text())
    assert [(p["turn"], p["regraded"]["speedup_eager"]) for p in record.get("budget", [])] == [(1, 0.9), (2, 1.2), (4, 1.2)]
    curve = json.loads((out / "report" / "report.json").read_text())["runs"][0]["metrics"]["best"]["budget_curve"]
    assert curve["source"] == "regraded" and curve["turns"] == [1, 2, 4]
    assert curve["faster_than_eager_rate"] == [0.0, 1.0, 1.0]  # in-trajectory numbers would say 1.0 from turn 1
    assert "trusted regrades at each budget point" in (out / "report" / "report.md").read_text()
