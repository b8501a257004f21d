"""A task whose probe fails becomes a recorded runner error, counted as a failure; the rest of the run goes on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import eval_toy_backend as toy_backend  # noqa: E402
from cuda_agent.harness.evaluation.config import EvalConfig  # noqa: E402
from cuda_agent.harness.evaluation.report import build_report  # noqa: E402
from cuda_agent.harness.evaluation.runner import EvalRunner  # noqa: E402
from cuda_agent.plugin_manager import PluginManager  # noqa: E402

GOOD = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x - 1\n\n\n" \
       "def get_inputs():\n    return [torch.rand(4, 4)]\n\n\ndef get_init_inputs():\n    return []\n"


@pytest.mark.slow
def test_probe_failure_is_a_runner_error_and_a_failure(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "good.py").write_text(GOOD)
    (tasks / "broken.py").write_text("import torch\n\nclass Model(:\n")
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump([
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "solution.txt", "content": "status=correct speedup=2 nonneg_only"}},
                        {"name": "verify"}]},
        {"tool_calls": [{"name": "finish"}]}]))
    cfg = EvalConfig.model_validate({"backend": "toy", "policy": f"scripted:{script}", "agent": {"max_turns": 3},
                                     "eval": {"tasks": f"folder:{tasks}", "progress": False}})
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("toy_backend", toy_backend)])
    outcome = EvalRunner(cfg, tmp_path / "out", plugin_manager=pm).run()
    assert (outcome.planned, outcome.ran, outcome.runner_errors) == (2, 2, 1)
    run = build_report([tmp_path / "out"])["runs"][0]
    rows = {r["task_id"]: r for r in run["episodes"]}
    assert rows["tasks/broken"]["exit"] == "runner_error"
    best = run["metrics"]["best"]
    assert best["regraded"]["overall"]["pass_rate"] == 0.5
    assert best["exits"] == {"runner_error": 1, "submitted": 1}
    # the probed good task was re-verified on widened inputs: the 'nonneg_only' candidate is a widened false pass
    assert (best["hidden"]["widened_checked"], best["hidden"]["widened_failed"]) == (1, 1)
    assert rows["tasks/good"]["selections"]["best"]["hidden_heldout_pass"] is True
