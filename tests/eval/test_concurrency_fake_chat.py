"""Episodes overlap against a slow chat server; the report carries GPU-queue utilisation.

Real runner, agent loop and ``openai`` policy over HTTP to the local fake
chat server (tests/fakes/chat_server.py, the outside-service fake) with
0.4 s latency per reply; two device slots of the toy backend plugin.
Overlap is measured from the episodes' recorded start/end times.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/, for fakes.chat_server
sys.path.insert(0, str(HERE))  # toy_backend

from fakes.chat_server import FakeChatServer, Reply  # noqa: E402

import eval_toy_backend as toy_backend  # noqa: E402
from cuda_agent.harness.evaluation.config import EvalConfig  # noqa: E402
from cuda_agent.harness.evaluation.records import read_eval_record  # noqa: E402
from cuda_agent.harness.evaluation.report import write_report  # noqa: E402
from cuda_agent.harness.evaluation.runner import EvalRunner, interval_overlap  # noqa: E402
from cuda_agent.plugin_manager import PluginManager  # noqa: E402

TASK = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x + {k}\n\n\n" \
       "def get_inputs():\n    return [torch.randn(4)]\n\n\ndef get_init_inputs():\n    return []\n"


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def responder(body: dict) -> Reply:
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if turn == 0:
        text = "\n".join([call("write_file", path="solution.txt", content="status=correct speedup=2.0"),
                          call("compile"), call("verify"), call("profile")])
    else:
        text = call("finish")
    return Reply(text, delay_s=0.4)


@pytest.mark.slow
def test_episodes_overlap_and_queue_utilisation_is_reported(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for k in range(4):
        (tasks / f"add{k}.py").write_text(TASK.format(k=k))
    with FakeChatServer([], models=["m"], responder=responder) as server:
        cfg = EvalConfig.model_validate({
            "backend": "toy",
            "policy": f"openai:m?base_url={server.base_url}&api_key=sk-test&max_attempts=1",
            "agent": {"max_turns": 4},
            "eval": {"tasks": f"folder:{tasks}", "seeds": 1, "concurrency": 4, "devices": [0, 1],
                     "probe": False, "progress": False},
        })
        pm = PluginManager(load_entrypoints=False, extra_plugins=[("toy_backend", toy_backend)])
        outcome = EvalRunner(cfg, tmp_path / "out", plugin_manager=pm).run()
        requests = server.request_count
    assert (outcome.ran, outcome.runner_errors) == (4, 0)
    assert requests == 8  # two turns per episode
    records = [read_eval_record(d) for d in sorted((tmp_path / "out" / "episodes").iterdir())]
    assert all(r.regrades["best"].passed for r in records)
    overlap, peak = interval_overlap([(r.started_at, r.ended_at) for r in records])
    assert overlap > 0 and peak >= 2, "episodes ran one after another"
    assert {r.device for r in records} == {0, 1}  # least-loaded placement used both slots
    assert outcome.session["max_in_flight"] >= 2 and outcome.session["overlap_s"] > 0

    report = write_report([tmp_path / "out"], tmp_path / "report", plots=False)
    queue = report["runs"][0]["queue"]
    assert set(queue["devices"]) == {"0", "1"}
    for dev in queue["devices"].values():
        assert dev["calls"] > 0 and 0.0 <= dev["utilisation"] <= 1.0
    assert "GPU-queue utilisation" in (tmp_path / "report" / "report.md").read_text()
