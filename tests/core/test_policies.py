"""scripted and replay policies, tool-call and single-turn parsers."""

from __future__ import annotations

import pytest
import yaml

from cuda_agent.config import RunConfig, load_config
from cuda_agent.control import PolicyExhausted
from cuda_agent.errors import ConfigError
from cuda_agent.loop import run_episode
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.trajectory import load_trajectory
from cuda_agent.single_turn import parse_solution_files
from cuda_agent.toolcalls import parse_tool_calls


@pytest.fixture(scope="module")
def registry():
    return PluginManager(load_entrypoints=False).registry


def test_scripted_from_yaml_file_and_exhaustion(registry, tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump(["hello", {"text": "t", "tool_calls": [{"name": "list_files"}]}]))
    policy = registry.build("policy", "scripted", {"target": str(script)})
    assert policy.query([], []).text == "hello"
    second = policy.query([], [])
    assert second.text.startswith("t\n<tool_call>") and '"name": "list_files"' in second.text
    with pytest.raises(PolicyExhausted):
        policy.query([], [])
    policy.reset()
    assert policy.query([], []).text == "hello"


def test_scripted_errors_name_the_action(registry, tmp_path):
    with pytest.raises(ConfigError, match="action 1 is invalid"):
        registry.build("policy", "scripted", {"actions": ["ok", {"txt": "typo"}]})
    with pytest.raises(ConfigError, match="needs a script"):
        registry.build("policy", "scripted", {})
    with pytest.raises(ConfigError, match="does not exist"):
        registry.build("policy", "scripted", {"target": str(tmp_path / "missing.yaml")})


def test_replay_reproduces_a_run(task, make_pm, tmp_path):
    actions = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "model_new.py", "content": "class ModelNew: pass\n"}},
                               {"name": "write_file", "arguments": {"path": "answer.txt", "content": "42"}},
                               {"name": "write_file", "arguments": {"path": "speed.txt", "content": "7"}}]},
               {"tool_calls": [{"name": "finish"}]}]
    base = {"backend": "toy"}
    first = run_episode(task, config=load_config(RunConfig, base={**base, "policy": "scripted",
                                                                  "plugins": {"scripted": {"actions": actions}}}),
                        plugin_manager=make_pm(), out_dir=tmp_path / "first")
    replayed = run_episode(task, config=load_config(RunConfig, base={**base, "policy": f"replay:{tmp_path / 'first'}"}),
                           plugin_manager=make_pm(), out_dir=tmp_path / "second")
    assert (replayed.exit, replayed.reward, replayed.graded.timing.median_ms) == (first.exit, first.reward, 7.0)
    a = load_trajectory(tmp_path / "first" / "trajectory.jsonl")
    b = load_trajectory(tmp_path / "second" / "trajectory.jsonl")
    assert [t.snapshot_id for t in a.turns] == [t.snapshot_id for t in b.turns]  # content-addressed: same states
    assert b.header.policy == f"replay:{tmp_path / 'first'}"


def test_parse_tool_calls_variants():
    text = ('a <tool_call>{"name": "x", "arguments": "{\\"p\\": 1}"}</tool_call>'
            '<tool_call>{"name": "y"}</tool_call><tool_call>[1]</tool_call>'
            '<tool_call>{"name": "z", "arguments": {}, "extra": 1}</tool_call>')
    calls, errors = parse_tool_calls(text, 3)
    assert [(c.id, c.name, c.arguments) for c in calls] == [("call_3_0", "x", {"p": 1}), ("call_3_1", "y", {})]
    assert len(errors) == 2 and "got list" in errors[0] and "unexpected keys ['extra']" in errors[1]


def test_parse_solution_files():
    text = "intro\n## Plan\nwords\n### kernels/a.cu\n\n````cuda\nx\n```inner```\n````\n### b.py\n```python\ny\n"
    files, errors = parse_solution_files(text)
    assert files == {"kernels/a.cu": "x\n```inner```\n", "b.py": "y\n"}
    assert errors == ["file block for 'b.py' is not closed with ```"]
    assert parse_solution_files("no files")[1][0].startswith("no file blocks found")
