"""Skills as an extension point: discovered from the package's files, registered with the backend they belong to,
and checked against the backend that names them; hookspec versions a plugin declares."""

from __future__ import annotations

import types

import pytest

from cuda_agent import HOOKSPEC_VERSION
from cuda_agent.errors import PluginError
from cuda_agent.plugin_manager import PluginManager, hookspec_mismatch
from cuda_agent.skills import load_skill, skill_files


def _plugin(name: str, **hooks):
    from cuda_agent.hookspecs import hookimpl

    mod = types.ModuleType(name)
    for hook, fn in hooks.items():
        fn.__name__ = hook
        setattr(mod, hook, hookimpl(fn))
    return mod


def test_builtin_skills_are_the_package_files():
    files = skill_files()
    assert files == {"cuda": "SKILL.md", "cpu": "cpu/SKILL.md"}
    assert load_skill("cpu").startswith("# Skill: writing fast, honest C++/OpenMP kernels")
    with pytest.raises(KeyError, match="unknown skill 'nope'; valid: cpu, cuda"):
        load_skill("nope")


def test_builtin_skills_belong_to_their_backends():
    pm = PluginManager(load_entrypoints=False)
    for name in ("cpu", "cuda"):
        entry = pm.registry.get("skill", name)
        assert entry.backend == name and entry.plugin == "skills.documents"
        assert pm.skill_problems(name, name) == []
    assert "registered for backend 'cuda'" in pm.skill_problems("cpu", "cuda")[0]


def test_a_plugin_registers_a_skill_for_its_backend():
    text = "# Skill: ACME kernels\n"
    plugin = _plugin("acme", register_skills=lambda register: register("acme", lambda: text, backend="acme_gpu"))
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("acme", plugin)])
    assert pm.skill_text("acme") == text
    assert pm.registry.get("skill", "acme").backend == "acme_gpu"
    assert pm.skill_problems("acme_gpu", "acme") == []
    assert pm.skill_problems("other", "acme") == [
        "backend 'other' names skill 'acme', which plugin 'acme' registered for backend 'acme_gpu'"]
    assert "which no plugin registers" in pm.skill_problems("acme_gpu", "missing")[0]


def test_only_skills_name_a_backend():
    plugin = _plugin("bad", register_rewards=lambda register: register("r", object, backend="cuda"))
    with pytest.raises(PluginError, match="registers reward 'r' with backend='cuda'; only skills"):
        PluginManager(load_entrypoints=False, extra_plugins=[("bad", plugin)])


@pytest.mark.parametrize(("declared", "problem"), [
    ("1.0", None), (HOOKSPEC_VERSION, None), ("0.9", "major versions differ"), ("2.0", "major versions differ"),
    ("1.9", "the plugin needs a newer minor version: upgrade cuda-agent"), ("one", "'one' is not MAJOR.MINOR"),
])
def test_hookspec_version_declared_by_a_plugin(declared, problem):
    assert hookspec_mismatch(declared, "1.1") == problem


def test_a_plugin_for_a_newer_minor_version_is_refused_at_load():
    mod = types.ModuleType("future_plugin")
    mod.CUDA_AGENT_HOOKSPEC_VERSION = "1.99"
    with pytest.raises(PluginError, match=r"written for hookspec version 1.99, this cuda-agent provides 1\.1 "
                                          r"\(the plugin needs a newer minor version"):
        PluginManager(load_entrypoints=False, extra_plugins=[("future", mod)])
