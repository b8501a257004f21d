"""The example third-party package (examples/acme-reward), selected by config, changes the reward in result.json."""

from __future__ import annotations

import json

import pytest

from cuda_agent.config import RunConfig, load_config
from cuda_agent.loop import run_episode
from cuda_agent.plugin_manager import PluginManager

pytest.importorskip("acme_reward", reason="install the example: pip install -e examples/acme-reward")

ACTIONS = [{"tool_calls": [
    {"name": "write_file", "arguments": {"path": "model_new.py", "content": "class ModelNew: pass\n"}},
    {"name": "write_file", "arguments": {"path": "answer.txt", "content": "42"}},
    {"name": "write_file", "arguments": {"path": "speed.txt", "content": "2.0"}},  # 4x faster than compile
    {"name": "finish", "arguments": {}},
]}]


@pytest.mark.parametrize(("overrides", "expected"), [
    ([], 3.0),
    (["reward=acme_bonus"], 3.5),
    (["reward=acme_bonus", "plugins.acme_bonus.bonus=2.0"], 5.0),
])
def test_example_reward_selected_by_config(task, toy_module, tmp_path, monkeypatch, overrides, expected):
    monkeypatch.setenv("CUDA_AGENT_PLUGINS", "acme")
    config = load_config(RunConfig, overrides=overrides,
                         base={"policy": "scripted", "backend": "toy", "plugins": {"scripted": {"actions": ACTIONS}}})
    pm = PluginManager(disable=config.disable, extra_plugins=[("toy", toy_module)])
    assert "acme" in {p.name for p in pm.plugins()}
    run_episode(task, config=config, plugin_manager=pm, out_dir=tmp_path / "run")
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["reward"] == expected
    assert result["reward_name"] == config.reward
    plugins = json.loads((tmp_path / "run" / "plugins.json").read_text())
    assert {"name": "acme", "distribution": "acme-reward"}.items() <= next(p for p in plugins if p["name"] == "acme").items()
