"""Plugin machinery: duplicates, misspelled hooks, disabling, config errors, and every hook's effect.

Datasette-style meta-tests: every hookspec is documented in docs/plugins.md
and has an entry in HOOK_TESTS naming a test here that checks its effect.
"""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent import hookspecs
from cuda_agent.config import RunConfig, load_config
from cuda_agent.errors import ConfigError, PluginError
from cuda_agent.hookspecs import hookimpl
from cuda_agent.loop import run_episode
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.protocols import FilterVerdict, StageContext, ToolOutput
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.specs import parse_tasks_spec

ROOT = Path(__file__).resolve().parents[2]

#: hookspec -> the test in this module that checks its effect.
HOOK_TESTS = {
    "register_tools": "test_register_tools_reaches_the_model",
    "register_rewards": "test_register_rewards_sets_the_reward",
    "register_backends": "test_register_backends_runs_episodes",
    "register_policies": "test_register_policies_spec_fills_config",
    "register_data_sources": "test_register_data_sources_yields_tasks",
    "register_task_filters": "test_register_task_filters_gives_verdicts",
    "register_stages": "test_register_stages_runs",
    "register_loggers": "test_register_loggers_writes_metrics",
    "on_episode_start": "test_observer_hooks_see_the_episode",
    "on_turn_end": "test_observer_hooks_see_the_episode",
    "on_episode_end": "test_observer_hooks_see_the_episode",
    "on_train_step": "test_on_train_step_reaches_observers",
    "register_skills": "test_register_skills_reaches_the_system_prompt",
    "register_commands": "test_register_commands_adds_a_cli_command",
    "doctor_checks": "test_doctor_checks_add_rows_to_doctor",
}


def hookspec_names() -> set[str]:
    return {n for n, f in vars(hookspecs).items() if callable(f) and hasattr(f, "cuda_agent_spec")}


def test_every_hookspec_has_an_effect_test():
    assert hookspec_names() == set(HOOK_TESTS), "add new hooks to HOOK_TESTS with a test of their effect"
    for test_name in HOOK_TESTS.values():
        assert callable(globals().get(test_name)), f"{test_name} is missing"


def test_every_hookspec_is_documented():
    doc = (ROOT / "docs" / "plugins.md").read_text()
    for name in hookspec_names():
        assert re.search(rf"^#+ .*`{name}`", doc, re.M), f"docs/plugins.md has no section for {name}"


def plugin(name: str, **hooks) -> types.SimpleNamespace:
    """A plugin object holding the given hook implementations."""
    return types.SimpleNamespace(**{k: hookimpl(v) for k, v in hooks.items()}, __name__=name)


# --------------------------------------------------------------------------- loading errors
def test_duplicate_registration_names_both_plugins():
    def register_rewards(register):
        register("milestone", object)

    with pytest.raises(PluginError, match="plugin 'dup' registers reward 'milestone', already registered by 'rewards.milestone'"):
        PluginManager(load_entrypoints=False, extra_plugins=[("dup", plugin("dup", register_rewards=register_rewards))])


def test_misspelled_hookimpl_fails_at_load():
    def register_tool(register):  # missing 's'
        pass

    with pytest.raises(PluginError, match="register_tool"):
        PluginManager(load_entrypoints=False, extra_plugins=[("typo", plugin("typo", register_tool=register_tool))])


def test_hookspec_major_version_mismatch_refused():
    mod = types.ModuleType("old_plugin")
    mod.CUDA_AGENT_HOOKSPEC_VERSION = "0.9"
    with pytest.raises(PluginError, match="written for hookspec version 0.9"):
        PluginManager(load_entrypoints=False, extra_plugins=[("old", mod)])


def test_disabling_plugins_and_components():
    pm = PluginManager(disable=["tools.files"], load_entrypoints=False)
    assert "read_file" not in pm.registry.names("tool") and "tools.files" not in {p.name for p in pm.plugins()}
    pm = PluginManager(disable=["tool:write_file"], load_entrypoints=False)
    assert "write_file" not in pm.registry.names("tool") and "read_file" in pm.registry.names("tool")
    with pytest.raises(ConfigError, match="disabled"):
        pm.registry.get("tool", "write_file", where="tools")
    with pytest.raises(PluginError, match="essential"):
        PluginManager(disable=["tools.finish"], load_entrypoints=False)


def test_unknown_config_keys_list_valid_ones():
    with pytest.raises(ConfigError, match=r"agent\.max_turn: unknown key \(did you mean 'max_turns'\?\); valid keys here: mode, max_turns"):
        load_config(RunConfig, overrides=["agent.max_turn=3"])
    with pytest.raises(ConfigError, match="valid keys: threshold, incorrect"):
        PluginManager(load_entrypoints=False).registry.build("reward", "milestone", {"treshold": 2})
    with pytest.raises(ConfigError, match="unknown policy 'scriptd'.*valid policies: .*scripted"):
        PluginManager(load_entrypoints=False).registry.get("policy", "scriptd")


class PlainConfig(BaseModel):
    """A block model written with pydantic's defaults (no ``extra`` setting)."""

    threshold: float = Field(1.0, description="A threshold.")


class LenientConfig(BaseModel):
    """A block model that states it accepts unknown keys."""

    model_config = ConfigDict(extra="allow")
    threshold: float = Field(1.0, description="A threshold.")


def test_plugin_blocks_refuse_unknown_keys_by_default():
    def register_rewards(register):
        register("plain", lambda cfg: cfg, config_model=PlainConfig)
        register("lenient", lambda cfg: cfg, config_model=LenientConfig)

    pm = PluginManager(load_entrypoints=False, extra_plugins=[("r", plugin("r", register_rewards=register_rewards))])
    with pytest.raises(ConfigError, match=r"plugins\.plain.*unknown key\(s\) 'treshold'"):
        pm.registry.build("reward", "plain", {"treshold": 2.0})
    assert pm.registry.build("reward", "plain", {"threshold": 2.0}).threshold == 2.0
    assert pm.registry.build("reward", "lenient", {"treshold": 2.0}).threshold == 1.0  # its own stated choice

    from cuda_agent.config import PluginConfig  # the base class docs/plugins.md tells authors to use

    class Documented(PluginConfig):
        """Written the way docs/plugins.md says."""

        threshold: float = Field(1.0, description="A threshold.")

    entry = pm.registry.get("reward", "plain")
    documented = type(entry)(kind="reward", name="documented", factory=lambda cfg: cfg, plugin="r", config_model=Documented)
    with pytest.raises(ConfigError, match=r"plugins\.documented.*treshold"):
        documented.build({"treshold": 2.0})


# --------------------------------------------------------------------------- each hook's effect
class EchoArgs(BaseModel):
    """Arguments of echo."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="Text to echo back.")


class EchoTool:
    """Echo a text."""

    name = "echo"
    description = "Echo the text back."
    Args = EchoArgs

    def run(self, args, ctx):
        return ToolOutput(content=f"echo: {args.text}")


def episode(task, toy_module, tmp_path, actions, extra=(), **overrides):
    config = load_config(RunConfig, overrides=[f"{k}={v}" for k, v in overrides.items()],
                         base={"policy": "scripted", "backend": "toy", "plugins": {"scripted": {"actions": actions}}})
    pm = PluginManager(disable=config.disable, load_entrypoints=False, extra_plugins=[("toy", toy_module), *extra])
    end = run_episode(task, config=config, plugin_manager=pm, out_dir=tmp_path / "run")
    return end, pm


def test_register_tools_reaches_the_model(task, toy_module, tmp_path):
    p = plugin("echo_plugin", register_tools=lambda register: register("echo", EchoTool))
    actions = [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}]
    end, _ = episode(task, toy_module, tmp_path, actions, extra=[("echo_plugin", p)], extra_tools="[echo]")
    from cuda_agent.schemas.trajectory import load_trajectory

    traj = load_trajectory(tmp_path / "run" / "trajectory.jsonl")
    assert "echo" in [t["name"] for t in traj.header.tools]
    assert traj.turns[0].observations[0].content == "echo: hi"


def test_an_installed_tool_joins_a_run_only_when_the_config_names_it(task, toy_module, tmp_path):
    """Installing a tool plugin must not change a benchmark's prompt: third-party tools are opt-in, and the
    system prompt hash every result carries changes with the tools offered."""
    from cuda_agent.schemas.trajectory import load_trajectory

    assert "extra_tools" in RunConfig.model_fields  # the opt-in list
    p = plugin("echo_plugin", register_tools=lambda register: register("echo", EchoTool))
    write = [{"tool_calls": [{"name": "write_file", "arguments": {"path": "answer.txt", "content": "42"}},
                             {"name": "toy_verify", "arguments": {}}]}]
    runs = {}
    for label, overrides in (("plain", {}), ("installed", {}), ("opted_in", {"extra_tools": "[echo]"})):
        extra = [] if label == "plain" else [("echo_plugin", p)]
        out = tmp_path / label
        config = load_config(RunConfig, overrides=["policy=scripted", "backend=toy", "extra_tools=[toy_verify]",
                                                   *(f"{k}={v}" for k, v in overrides.items())],
                             base={"plugins": {"scripted": {"actions": write}}})
        if "extra_tools" in overrides:
            config.extra_tools = ["toy_verify", "echo"]
        pm = PluginManager(load_entrypoints=False, extra_plugins=[("toy", toy_module), *extra])
        run_episode(task, config=config, plugin_manager=pm, out_dir=out)
        traj = load_trajectory(out / "trajectory.jsonl")
        runs[label] = ([t["name"] for t in traj.header.tools], traj.turns[0].results[0].provenance.system_prompt_hash)
    assert "echo" not in runs["installed"][0] and runs["installed"] == runs["plain"]
    assert runs["opted_in"][0][-1] == "echo" and runs["opted_in"][1] != runs["plain"][1]


class ConstantReward:
    """Always 7."""

    def score(self, graded, turn_results=()):
        return 7.0


def test_register_rewards_sets_the_reward(task, toy_module, tmp_path):
    p = plugin("seven", register_rewards=lambda register: register("seven", ConstantReward))
    end, _ = episode(task, toy_module, tmp_path, [], extra=[("seven", p)], reward="seven")
    assert end.reward == 7.0 and json.loads((tmp_path / "run" / "result.json").read_text())["reward"] == 7.0


def test_register_backends_runs_episodes(task, toy_module, tmp_path):
    end, pm = episode(task, toy_module, tmp_path, [])
    assert "toy" in pm.registry.names("backend")
    assert end.graded.phase == "grade" and (tmp_path / "run" / "workspace" / "model.py").read_text() == task.code


class TargetConfig(BaseModel):
    """A policy config with a custom spec target field."""

    model_config = ConfigDict(extra="forbid")
    spec_target: ClassVar[str] = "model"
    model: str = Field(description="Model name.")
    temperature: float = Field(1.0, description="Temperature.")


def test_register_policies_spec_fills_config(task, toy_module, tmp_path):
    built = []

    def factory(config):
        built.append(config)
        from cuda_agent.scripted_policy import ScriptedPolicy

        return ScriptedPolicy([])

    p = plugin("pol", register_policies=lambda register: register("mine", factory, config_model=TargetConfig))
    end, _ = episode(task, toy_module, tmp_path, [], extra=[("pol", p)], policy="'mine:big-model?temperature=0.2'")
    assert built[0].model == "big-model" and built[0].temperature == 0.2
    assert end.exit == "policy_exhausted"


class ListSourceConfig(BaseModel):
    """Config of the list source."""

    model_config = ConfigDict(extra="forbid")
    target: str = Field(description="Comma-separated task names.")


class ListSource:
    """Tasks named in the target."""

    def __init__(self, config):
        self.names = config.target.split(",")

    def iter_tasks(self):
        for name in self.names:
            yield TaskManifest.from_code(f"list/{name}", f"# {name}\n")


def test_register_data_sources_yields_tasks():
    p = plugin("src", register_data_sources=lambda register: register("listsrc", ListSource, config_model=ListSourceConfig))
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("src", p)])
    spec = parse_tasks_spec("listsrc:a,b", set(pm.registry.names("data_source")))
    source = pm.registry.build("data_source", spec.name, spec.config())
    assert [t.id for t in source.iter_tasks()] == ["list/a", "list/b"]


class ShortFilter:
    """Drops tasks with short code."""

    def check(self, task, backend):
        return FilterVerdict(keep=len(task.code) > 5, reason=None if len(task.code) > 5 else "too_short")


def test_register_task_filters_gives_verdicts():
    p = plugin("flt", register_task_filters=lambda register: register("short", ShortFilter))
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("flt", p)])
    f = pm.registry.build("task_filter", "short")
    assert f.check(TaskManifest.from_code("a", "x"), None).reason == "too_short"
    assert f.check(TaskManifest.from_code("b", "long enough"), None).keep


class EchoStage:
    """Returns its inputs plus a marker."""

    def run(self, ctx):
        return {**ctx.inputs, "ran": str(ctx.run_dir)}


def test_register_stages_runs(tmp_path):
    p = plugin("stg", register_stages=lambda register: register("echo_stage", EchoStage))
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("stg", p)])
    stage = pm.registry.build("stage", "echo_stage")
    out = stage.run(StageContext(run_dir=tmp_path, config=None, plugin_manager=pm, inputs={"actor": "a"}))
    assert out == {"actor": "a", "ran": str(tmp_path)}


def test_register_loggers_writes_metrics(tmp_path):
    pm = PluginManager(load_entrypoints=False)
    logger = pm.registry.build("logger", "jsonl", {"path": str(tmp_path / "m.jsonl")})
    logger.log({"loss": 0.5}, step=3, stage="rft")
    logger.close()
    line = json.loads((tmp_path / "m.jsonl").read_text())
    assert line["loss"] == 0.5 and line["step"] == 3 and line["stage"] == "rft"


class Recorder:
    """Observer plugin recording every hook call."""

    def __init__(self):
        self.calls = []

    @hookimpl
    def on_episode_start(self, run_id, task_id, config):
        self.calls.append(("start", run_id, task_id, config.backend))

    @hookimpl
    def on_turn_end(self, run_id, turn):
        self.calls.append(("turn", run_id, turn.turn, len(turn.observations)))

    @hookimpl
    def on_episode_end(self, run_id, end):
        self.calls.append(("end", run_id, end.exit, end.reward))

    @hookimpl
    def on_train_step(self, stage, step, metrics):
        self.calls.append(("train", stage, step, metrics))


def test_observer_hooks_see_the_episode(task, toy_module, tmp_path):
    rec = Recorder()
    actions = [{"tool_calls": [{"name": "list_files", "arguments": {}}]}, {"tool_calls": [{"name": "finish", "arguments": {}}]}]
    end, _ = episode(task, toy_module, tmp_path, actions, extra=[("rec", rec)])
    assert rec.calls == [("start", "run", task.id, "toy"), ("turn", "run", 1, 1), ("turn", "run", 2, 1),
                         ("end", "run", "submitted", end.reward)]


def test_on_train_step_reaches_observers():
    rec = Recorder()
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("rec", rec)])
    pm.on_train_step(stage="rft", step=1, metrics={"loss": 1.0})
    assert rec.calls == [("train", "rft", 1, {"loss": 1.0})]




def test_register_skills_reaches_the_system_prompt(task, toy_module, tmp_path):
    assert "register_skills" in hookspec_names()
    body = "ACME SKILL: write kernels in the ACME dialect."
    p = plugin("acme_skill", register_skills=lambda register: register("acme", lambda: body, description="ACME"))

    class AcmeBackend(toy_module.ToyBackend):
        name, skill = "acme_backend", "acme"

    b = plugin("acme_backend", register_backends=lambda register: register("acme_backend", AcmeBackend))
    end, pm = episode(task, toy_module, tmp_path, [], extra=[("acme_skill", p), ("acme_backend", b)], backend="acme_backend")
    from cuda_agent.schemas.trajectory import load_trajectory

    assert body in load_trajectory(tmp_path / "run" / "trajectory.jsonl").header.system_prompt
    assert {"cuda", "cpu", "acme"} <= set(pm.registry.names("skill"))
    with pytest.raises(ConfigError, match="unknown skill 'nope'.*valid skills: acme, cpu, cuda"):
        pm.skill_text("nope")


HELLO_PLUGIN = """
from cuda_agent.hookspecs import hookimpl


def add_parser(subparsers):
    p = subparsers.add_parser("hello", help="Say hello.")
    p.add_argument("--name", default="world")
    p.set_defaults(func=lambda args: print(f"hello {args.name}") or 7)


@hookimpl
def register_commands(register):
    register("hello", add_parser, description="Say hello (a third-party command).")


@hookimpl
def doctor_checks():
    return {"acme_device": {"ok": False, "detail": "no ACME board attached", "boards": 0}}
"""


@pytest.fixture()
def hello_module(tmp_path, monkeypatch):
    (tmp_path / "hello_cmd_plugin.py").write_text(HELLO_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "hello_cmd_plugin"


def test_register_commands_adds_a_cli_command(hello_module, capsys):
    assert "register_commands" in hookspec_names()
    from cuda_agent import cli

    assert cli.main(["-p", hello_module, "hello", "--name", "plugin"]) == 7
    assert capsys.readouterr().out == "hello plugin\n"
    with pytest.raises(SystemExit):
        cli.main(["-p", hello_module, "--help"])
    assert "Say hello (a third-party command)." in capsys.readouterr().out
    # the built-in commands come through the same hook, from plugins named commands.*
    pm = PluginManager(load_entrypoints=False)
    owners = {e.name: e.plugin for e in pm.registry.entries("command")}
    assert owners["eval"] == owners["report"] == owners["ablate"] == "commands.evaluation"
    assert (owners["score"], owners["data"], owners["train"]) == ("commands.score", "commands.data", "commands.train")


def test_doctor_checks_add_rows_to_doctor(hello_module, capsys):
    assert "doctor_checks" in hookspec_names()
    from cuda_agent import cli

    assert cli.main(["-p", hello_module, "doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["acme_device"] == {"ok": False, "detail": "no ACME board attached", "boards": 0}
    assert report["bubblewrap"]["detail"]  # the built-in sandbox row comes through the same hook
    twice = plugin("twice", doctor_checks=lambda: {"acme_device": {"ok": True, "detail": "again"}})
    import importlib

    pm = PluginManager(load_entrypoints=False, extra_plugins=[(hello_module, importlib.import_module(hello_module)),
                                                             ("twice", twice)])
    with pytest.raises(PluginError, match="doctor check 'acme_device', already reported by"):
        pm.doctor_checks()
