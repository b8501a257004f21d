"""The agent loop end to end with the scripted policy and the toy backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.config import RunConfig, load_config
from cuda_agent.errors import ConfigError
from cuda_agent.loop import run_episode
from cuda_agent.schemas.trajectory import load_trajectory

GOOD_MODEL = "class ModelNew:\n    pass\n"


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def make_config(actions, **overrides) -> RunConfig:
    base = {"policy": "scripted", "backend": "toy", "plugins": {"scripted": {"actions": actions}},
            "extra_tools": ["toy_verify", "toy_profile", "boom"]}  # the toy plugin's tools are third-party: opt-in
    return load_config(RunConfig, overrides=[f"{k}={v}" for k, v in overrides.items()], base=base)


def run(task, make_pm, tmp_path, actions, pm_kwargs=None, **overrides):
    config = make_config(actions, **overrides)
    pm = make_pm(**(pm_kwargs or {}))
    end = run_episode(task, config=config, plugin_manager=pm, out_dir=tmp_path / "run")
    return end, load_trajectory(tmp_path / "run" / "trajectory.jsonl"), json.loads((tmp_path / "run" / "result.json").read_text())


def test_submit_grades_final_state(task, make_pm, tmp_path):
    actions = [
        {"tool_calls": [call("write_file", path="model_new.py", content=GOOD_MODEL),
                        call("write_file", path="answer.txt", content="42"),
                        call("write_file", path="speed.txt", content="4.0")]},
        {"text": "done", "tool_calls": [call("finish")]},
    ]
    end, traj, result = run(task, make_pm, tmp_path, actions)
    assert end.exit == "submitted" and end.turns == 2
    assert end.graded.status.value == "correct" and end.graded.phase == "grade"
    assert end.reward == 3.0 and result["reward"] == 3.0 and result["reward_name"] == "milestone"
    assert traj.complete and len(traj.turns) == 2 and not traj.truncated
    assert [o.name for o in traj.turns[0].observations] == ["write_file"] * 3
    assert traj.turns[0].snapshot_id.startswith("sha256:")
    assert result["selected_snapshot_id"] == traj.turns[-1].snapshot_id
    for name in ("config.json", "plugins.json", "versions.json"):
        assert (tmp_path / "run" / name).is_file()
    assert "cuda-agent" in json.loads((tmp_path / "run" / "versions.json").read_text())
    # graded in a fresh folder restored from the snapshot, not the live workspace
    assert (tmp_path / "run" / "graded" / "answer.txt").read_text() == "42"


def test_malformed_calls_become_observations(task, make_pm, tmp_path):
    actions = [
        "I will think without calling anything",
        '<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>',
        '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "read_file", "arguments": {"pth": "model.py"}}</tool_call>',
        '<tool_call>{"name": "boom", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "write_file", "arguments": {"path": "../x", "content": "a"}}</tool_call>',
        '<tool_call>{"name": "write_file", "arguments": {"path": "model.py", "content": "a"}}</tool_call>',
        '<tool_call>{"name": "read_file", "arguments": {"path": "model.py"}}</tool_call> <tool_call>{"name":',
    ]
    end, traj, _ = run(task, make_pm, tmp_path, actions)
    assert end.exit == "policy_exhausted" and end.turns == len(actions)
    obs = [t.observations for t in traj.turns]
    assert obs[0][0].name == "format_error" and "no tool call" in obs[0][0].content
    assert obs[1][0].name == "format_error" and "invalid JSON" in obs[1][0].content
    assert obs[2][0].is_error and "unknown tool 'no_such_tool'" in obs[2][0].content and "read_file" in obs[2][0].content
    assert obs[3][0].is_error and "invalid arguments for read_file" in obs[3][0].content
    assert obs[4][0].is_error and "RuntimeError: kaboom" in obs[4][0].content
    assert obs[5][0].is_error and "'..'" in obs[5][0].content
    assert obs[6][0].is_error and "protected" in obs[6][0].content
    assert obs[7][0].name == "format_error" and "not closed" in obs[7][0].content
    assert not obs[7][1].is_error and "class Model" in obs[7][1].content  # the valid call still ran
    assert end.graded.status.value == "compile_error" and end.reward == -1.0


def test_edit_list_read_tools(task, make_pm, tmp_path):
    actions = [
        {"tool_calls": [call("write_file", path="k.cpp", content="a b a"),
                        call("edit_file", path="k.cpp", old="a", new="c"),
                        call("edit_file", path="k.cpp", old="b", new="B"),
                        call("edit_file", path="k.cpp", old="zz", new="y"),
                        call("list_files"),
                        call("read_file", path="k.cpp")]},
    ]
    _, traj, _ = run(task, make_pm, tmp_path, actions)
    o = traj.turns[0].observations
    assert o[1].is_error and "2 times" in o[1].content
    assert not o[2].is_error
    assert o[3].is_error and "not found" in o[3].content
    assert "model.py (protected)" in o[4].content and "k.cpp" in o[4].content
    assert o[5].content == "a B a"


@pytest.mark.parametrize(("selection", "expected_ms"), [("best", 2.0), ("final", 5.0), ("first_passing", 6.0)])
def test_selection(task, make_pm, tmp_path, selection, expected_ms):
    def attempt(ms):
        return {"tool_calls": [call("write_file", path="speed.txt", content=str(ms)), call("toy_profile")]}

    actions = [
        {"tool_calls": [call("write_file", path="model_new.py", content=GOOD_MODEL), call("toy_profile")]},  # fails: no answer
        {"tool_calls": [call("write_file", path="answer.txt", content="42")]},
        attempt(6.0), attempt(2.0), attempt(9.0),
        {"tool_calls": [call("write_file", path="speed.txt", content="5.0"), call("finish")]},
    ]
    end, traj, _ = run(task, make_pm, tmp_path, actions, **{"agent.selection": selection})
    assert end.graded.timing.median_ms == expected_ms
    assert traj.turns[0].results[0].status.value == "compile_error" or traj.turns[0].results[0].status.value == "incorrect"
    assert all(r.snapshot_id for t in traj.turns for r in t.results)


def test_limits(task, make_pm, tmp_path):
    actions = [{"tool_calls": [call("list_files")]}] * 10
    end, traj, _ = run(task, make_pm, tmp_path, actions, **{"agent.max_turns": 3})
    assert end.exit == "max_turns" and len(traj.turns) == 3
    end2 = run_episode(task, config=make_config(actions, **{"agent.max_tokens": 1}), plugin_manager=make_pm(),
                       out_dir=tmp_path / "tok")
    assert end2.exit == "max_tokens" and end2.turns == 1


def test_observation_truncated_with_marker(task, make_pm, tmp_path):
    actions = [{"tool_calls": [call("write_file", path="big.txt", content="x" * 1000), call("read_file", path="big.txt")]}]
    _, traj, _ = run(task, make_pm, tmp_path, actions, **{"agent.observation_limit": 200})
    content = traj.turns[0].observations[1].content
    assert content.startswith("x" * 200) and "800 more characters" in content


def test_native_protocol(task, make_pm, tmp_path):
    actions = [{"tool_calls": [call("list_files"), call("finish")]}]
    config = make_config(actions, **{"agent.tool_protocol": "native"})
    config.plugins["scripted"]["native"] = True
    end = run_episode(task, config=config, plugin_manager=make_pm(), out_dir=tmp_path / "n")
    traj = load_trajectory(tmp_path / "n" / "trajectory.jsonl")
    assert end.exit == "submitted"
    assert traj.turns[0].tool_calls[0].id == "call_1_0"
    assert "<tool_call>" not in traj.header.system_prompt


def test_disabled_tool_vanishes_from_schemas(task, make_pm, tmp_path):
    actions = [{"tool_calls": [call("edit_file", path="model_new.py", old="#", new="x")]}]
    config = make_config(actions, disable="[edit_file]")
    end = run_episode(task, config=config, plugin_manager=make_pm(disable=config.disable), out_dir=tmp_path / "d")
    traj = load_trajectory(tmp_path / "d" / "trajectory.jsonl")
    names = [t["name"] for t in traj.header.tools]
    assert "edit_file" not in names and "write_file" in names
    assert "edit_file" not in traj.header.system_prompt
    obs = traj.turns[0].observations[0]
    assert obs.is_error and "unknown tool 'edit_file'" in obs.content
    assert end.turns == 1


def test_disabling_a_selected_component_errors(task, make_pm, tmp_path):
    config = make_config([], tools="[read_file, finish]", disable="[read_file]")
    with pytest.raises(ConfigError, match="read_file"):
        run_episode(task, config=config, plugin_manager=make_pm(disable=config.disable), out_dir=tmp_path / "x")
    config = make_config([], disable="[milestone]")
    with pytest.raises(ConfigError, match="'milestone' at 'reward'"):
        run_episode(task, config=config, plugin_manager=make_pm(disable=config.disable), out_dir=tmp_path / "y")


def test_unknown_plugin_block_lists_valid(task, make_pm, tmp_path):
    config = make_config([])
    config.plugins["milestoen"] = {"threshold": 1.1}
    with pytest.raises(ConfigError, match="plugins.milestoen names no registered component; valid: .*milestone"):
        run_episode(task, config=config, plugin_manager=make_pm(), out_dir=tmp_path / "z")


def test_reward_config_block_changes_reward(task, make_pm, tmp_path):
    actions = [{"tool_calls": [call("write_file", path="model_new.py", content=GOOD_MODEL),
                               call("write_file", path="answer.txt", content="42"),
                               call("write_file", path="speed.txt", content="9.0"), call("finish")]}]
    config = make_config(actions, reward="speedup")
    config.plugins["speedup"] = {"baseline": "eager"}
    end = run_episode(task, config=config, plugin_manager=make_pm(), out_dir=tmp_path / "r")
    assert end.reward == pytest.approx(10.0 / 9.0)


def test_single_turn_mode(task, make_pm, tmp_path):
    text = (
        "Here is my solution.\n\n### model_new.py\n```python\nclass ModelNew:\n    pass\n```\n\n"
        "### `answer.txt`\n```\n42\n```\n### speed.txt\n~~~\n2.5\n~~~\n"
    )
    end, traj, _ = run(task, make_pm, tmp_path, [text], **{"agent.mode": "single_turn"})
    assert end.exit == "submitted" and end.turns == 1
    phases = [r.phase for r in traj.turns[0].results]
    assert phases == ["compile", "verify", "profile"]
    assert end.graded.timing.median_ms == 2.5 and end.reward == 3.0
    assert "### path/to/file" in traj.header.task_prompt


class _ExplodingPolicy:
    """Answers ``replies`` (PolicyOutputs), then fails like an endpoint that went down."""

    def __init__(self, replies=()):
        self.replies = list(replies)

    def reset(self):
        pass

    def query(self, messages, tools):
        if self.replies:
            return self.replies.pop(0)
        raise ConnectionError("endpoint down")


def test_a_policy_error_on_an_untouched_workspace_is_not_graded(task, make_pm, tmp_path):
    config = make_config([])
    end = run_episode(task, config=config, plugin_manager=make_pm(), out_dir=tmp_path / "p", policy=_ExplodingPolicy())
    assert end.exit == "policy_error" and "endpoint down" in end.message
    # nothing was written: grading the untouched layout would report compile_error as if the model had failed
    assert end.graded is None and end.reward is None and "not graded" in end.message


def test_a_policy_error_after_the_model_wrote_code_still_grades(task, make_pm, tmp_path):
    from cuda_agent.schemas.messages import PolicyOutput

    wrote = PolicyOutput(text='<tool_call>{"name": "write_file", "arguments": {"path": "answer.txt", '
                              '"content": "42"}}</tool_call>')
    end = run_episode(task, config=make_config([]), plugin_manager=make_pm(), out_dir=tmp_path / "p",
                      policy=_ExplodingPolicy([wrote]))
    assert end.exit == "policy_error" and end.turns == 1
    assert end.graded is not None and end.reward is not None


def test_use_skill_toggle(task, make_pm, tmp_path):
    from cuda_agent.skills import load_skill

    skill = load_skill("cpu").strip()
    _, traj, _ = run(task, make_pm, tmp_path, [], **{"agent.use_skill": True})
    assert skill in traj.header.system_prompt
    end = run_episode(task, config=make_config([], **{"agent.use_skill": False}), plugin_manager=make_pm(),
                      out_dir=tmp_path / "noskill")
    header = load_trajectory(tmp_path / "noskill" / "trajectory.jsonl").header
    assert skill not in header.system_prompt and end.turns == 0


def test_harness_error_mid_episode_is_recorded_and_graded(task, make_pm, tmp_path, monkeypatch):
    from cuda_agent.harness.workspace import ConfinedWorkspace

    calls = {"n": 0}
    original = ConfinedWorkspace.snapshot

    def flaky_snapshot(self):
        calls["n"] += 1
        if calls["n"] == 2:  # the first snapshot records the fresh layout; the second is the first turn's
            raise OSError("disk full")
        return original(self)

    monkeypatch.setattr(ConfinedWorkspace, "snapshot", flaky_snapshot)
    end, traj, result = run(task, make_pm, tmp_path, [{"tool_calls": [call("list_files")]}])
    assert end.exit == "error" and "OSError: disk full" in end.message
    assert result["graded"]["phase"] == "grade" and traj.end is not None


def test_custom_system_template_strict(task, make_pm, tmp_path):
    good = tmp_path / "good.j2"
    good.write_text("Custom for {{ task.name }} with {{ tools | length }} tools via {{ protocol }}.")
    end, traj, _ = run(task, make_pm, tmp_path, [], **{"agent.system_prompt_template": str(good)})
    assert traj.header.system_prompt.startswith("Custom for relu with") and "via text" in traj.header.system_prompt
    bad = tmp_path / "bad.j2"
    bad.write_text("{{ no_such_variable }}")
    with pytest.raises(ConfigError, match=r"template .*bad.j2: 'no_such_variable' is undefined; available variables: .*skill"):
        run_episode(task, config=make_config([], **{"agent.system_prompt_template": str(bad)}), plugin_manager=make_pm(),
                    out_dir=tmp_path / "bad")


def test_builtin_prompt_lists_compact_schemas(task, make_pm, tmp_path):
    _, traj, _ = run(task, make_pm, tmp_path, [])
    prompt = traj.header.system_prompt
    assert '"path": {"description": "File path relative to the workspace root' in prompt
    assert '"title"' not in prompt and "<tool_call>" in prompt


def test_unavailable_backend_is_refused(task, make_pm, toy_module, tmp_path):
    class Unavailable(toy_module.ToyBackend):
        def availability(self):
            return False, "no CUDA device visible"

    backend = Unavailable()
    with pytest.raises(ConfigError, match="backend 'toy' is not usable here: no CUDA device visible"):
        run_episode(task, config=make_config([]), plugin_manager=make_pm(), out_dir=tmp_path / "u", backend=backend)
    assert not (tmp_path / "u" / "trajectory.jsonl").exists()
