"""Provenance: every result, eval report and score report names the config (hash, secrets excluded), the enabled
plugins with distributions and versions, and the whole system prompt (hash of skill + task + tool schemas)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cuda_agent import __version__, cli  # noqa: E402

TASK = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n" \
       "def get_inputs():\n    return [torch.rand(4)]\n\n\ndef get_init_inputs():\n    return []\n"


def _prompt_hash(header: dict) -> str:
    blob = json.dumps({"system_prompt": header["system_prompt"], "tools": header["tools"]}, sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


def test_results_and_reports_carry_config_plugins_and_prompt(tmp_path, capsys):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "double.py").write_text(TASK)
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "solution.txt", "content": "status=correct speedup=2"}},
                        {"name": "profile"}]},
        {"tool_calls": [{"name": "finish"}]}]))
    out = tmp_path / "out"
    assert cli.main(["-p", "eval_toy_backend", "eval", "--tasks", str(tasks), "--policy", f"scripted:{script}",
                     "--backend", "toy", "--turns", "3", "--out", str(out), "-o", "eval.probe=false",
                     "-o", "eval.progress=false", "--no-plots"]) == 0
    ep = out / "episodes" / "tasks--double__seed0"
    lines = [json.loads(x) for x in (ep / "trajectory.jsonl").read_text().splitlines()]
    header = lines[0]
    # the config hash of a config without secrets: sha256 of its sorted JSON (cuda_agent.config.config_hash)
    expected_config = "sha256:" + hashlib.sha256(json.dumps(header["config"], sort_keys=True).encode()).hexdigest()[:16]
    tool_results = [r for line in lines if line["type"] == "turn" for r in line["results"]]
    graded = [json.loads((ep / "result.json").read_text())["graded"]]
    regrades = list(json.loads((ep / "eval.json").read_text())["regrades"].values())
    assert tool_results and graded and regrades
    for result in tool_results + graded + regrades:
        prov = result["provenance"]
        assert prov["config_hash"] == expected_config
        assert prov["system_prompt_hash"] == _prompt_hash(header)
        assert prov["plugins"]["tools.files"] == f"cuda-agent {__version__}"
        assert prov["plugins"]["eval_toy_backend"] == "(local) ?"

    report = json.loads((out / "report" / "report.json").read_text())["runs"][0]["provenance"]
    assert report["config_hash"] == json.loads((out / "config.json").read_text())["config_hash"]
    assert report["config_hash"].startswith("sha256:") and report["plugins"]["policies.scripted"].startswith("cuda-agent")
    assert report["system_prompt_hashes"] == [_prompt_hash(header)]
    md = (out / "report" / "report.md").read_text()
    assert _prompt_hash(header) in md and "policies.scripted (cuda-agent" in md

    solutions = tmp_path / "solutions" / "double"
    solutions.mkdir(parents=True)
    (solutions / "solution.txt").write_text("status=correct speedup=2")
    cli.main(["-p", "eval_toy_backend", "score", str(solutions.parent), "--tasks", str(tasks), "--backend", "toy",
              "--out", str(tmp_path / "score")])
    scored = json.loads((tmp_path / "score" / "report.json").read_text())["provenance"]
    assert scored["config_hash"].startswith("sha256:") and scored["plugins"]["eval_toy_backend"] == "(local) ?"
