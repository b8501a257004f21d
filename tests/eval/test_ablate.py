"""``cuda-agent ablate``: leave-one-out and variants files, one comparison table (toy backend via ``-p``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # so "-p eval_toy_backend" imports tests/eval/eval_toy_backend.py

from cuda_agent.cli import main as cuda_agent_main  # noqa: E402
from cuda_agent.harness.evaluation.ablate import leave_one_out, variants_from_file  # noqa: E402

TASK = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n" \
       "def get_inputs():\n    return [torch.randn(4)]\n\n\ndef get_init_inputs():\n    return []\n"


def test_variant_planning(tmp_path):
    names = [(v.name, v.overrides, v.disable) for v in leave_one_out(["profile", "skill", "loop", "tool:verify"])]
    assert names == [("base", [], []), ("no_profile", [], ["profile"]), ("no_skill", ["agent.use_skill=false"], []),
                     ("no_loop", ["agent.mode=single_turn"], []), ("no_tool_verify", [], ["tool:verify"])]
    f = tmp_path / "v.yaml"
    f.write_text(yaml.safe_dump([{"name": "short", "set": {"agent.max_turns": 2, "eval.selections": ["best"]}}]))
    v = variants_from_file(f)
    assert [x.name for x in v] == ["base", "short"]
    assert v[1].overrides == ["agent.max_turns=2", "eval.selections=[best]"]


@pytest.mark.slow
def test_leave_one_out_runs_each_variant_and_prints_one_table(tmp_path, capsys):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "double.py").write_text(TASK)
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "solution.txt", "content": "status=correct speedup=3"}},
                        {"name": "verify"}, {"name": "profile"}]},
        {"tool_calls": [{"name": "finish"}]},
    ]))
    out = tmp_path / "abl"
    rc = cuda_agent_main(["-p", "eval_toy_backend", "ablate", "--tasks", str(tasks), "--policy", f"scripted:{script}",
                          "--backend", "toy", "--turns", "3", "--seeds", "1", "--out", str(out),
                          "--leave-one-out", "profile", "-o", "eval.probe=false", "-o", "eval.progress=false"])
    assert rc == 0
    table = capsys.readouterr().out
    lines = [ln for ln in table.splitlines() if ln.startswith(("base", "no_profile"))]
    assert len(lines) == 2 and "100.0%" in lines[0]
    report = json.loads((out / "report" / "report.json").read_text())
    runs = {r["name"]: r for r in report["runs"]}
    assert set(runs) == {"base", "no_profile"}
    # without the profile tool the agent never sees a speedup: in-trajectory best is untimed, regrading times it
    nb = runs["no_profile"]["metrics"]["best"]
    assert nb["in_trajectory"]["overall"]["geomean_speedup_eager"] is None
    assert nb["regraded"]["overall"]["geomean_speedup_eager"] == pytest.approx(3.0)
    assert runs["base"]["metrics"]["best"]["in_trajectory"]["overall"]["geomean_speedup_eager"] == pytest.approx(3.0)
    saved = json.loads((out / "no_profile" / "config.json").read_text())["config"]
    assert saved["disable"] == ["profile"]
