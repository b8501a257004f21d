"""The device-adapter protocol: the built-in cpu and cuda backends are its users, the conformance kit checks an
adapter, its runner loader and its skill, and the runner's loader resolution fails with the spec named."""

from __future__ import annotations

import types

import pytest

from cuda_agent.harness.device_adapter import DEVICE_KINDS, DeviceAdapter, RunnerLoader, load_runner_loader
from cuda_agent.harness.device_backend import DeviceBackend
from cuda_agent.harness.extension_loader import ExtensionLoader
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.testing import ConformanceError, check_adapter, check_skill
from cuda_agent.testing import backends as kit


@pytest.fixture(scope="module")
def pm():
    return PluginManager(load_entrypoints=False)


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_builtin_backends_are_device_backends_over_conforming_adapters(pm, name):
    backend = pm.registry.build("backend", name)
    try:
        assert isinstance(backend, DeviceBackend) and isinstance(backend.adapter, DeviceAdapter)
        assert (backend.name, backend.skill, backend.kind) == (name, name, name)
        assert backend.kernel_suffix == {"cpu": ".cpp", "cuda": ".cu"}[name]
        assert backend.adapter.runner_loader is None  # the built cuda_extension
        check_adapter(backend.adapter)
        assert check_skill(backend, pm).startswith("# Skill")
    finally:
        backend.close()


def test_the_kit_states_the_harness_device_kinds():
    assert kit.DEVICE_KINDS == DEVICE_KINDS


def test_a_broken_adapter_is_described_in_full():
    class Broken:
        name, skill, kernel_suffix, language = "broken", "broken", ".x", ""
        device_kind = "tpu"
        runner_loader = "no_such_module_xyz:Loader"

        def availability(self, config):
            return True, ""

    with pytest.raises(ConformanceError) as err:
        check_adapter(Broken())
    text = str(err.value)
    assert "attribute 'language' must be a non-empty string" in text
    assert "device_kind 'tpu': valid kinds are cpu, cuda" in text
    assert "method layout() is missing" in text and "method availability() is missing" not in text
    assert "runner_loader 'no_such_module_xyz:Loader' does not import" in text


def test_a_skill_registered_for_another_backend_fails_the_kit(pm):
    class Impostor:
        name, skill = "impostor", "cpu"

    with pytest.raises(ConformanceError, match="names skill 'cpu', which plugin 'skills.documents' registered for "
                                               "backend 'cpu'"):
        check_skill(Impostor(), pm)


def test_a_skill_registered_for_no_backend_or_without_a_title_fails_the_kit():
    from cuda_agent.hookspecs import hookimpl

    mod = types.ModuleType("loose_skill")
    mod.register_skills = hookimpl(lambda register: register("loose", lambda: "no title here"))
    pm = PluginManager(load_entrypoints=False, extra_plugins=[("loose", mod)])

    class Loose:
        name, skill = "loose_backend", "loose"

    with pytest.raises(ConformanceError) as err:
        check_skill(Loose(), pm)
    assert "registered for no backend: register it with backend='loose_backend'" in str(err.value)
    assert "must start with a Markdown title" in str(err.value)


def test_runner_loader_resolution():
    assert isinstance(load_runner_loader(None), ExtensionLoader)
    assert isinstance(load_runner_loader("cuda_agent.harness.extension_loader:ExtensionLoader"), RunnerLoader)
    with pytest.raises(ValueError, match="expected 'module:Class'"):
        load_runner_loader("no_colon")
    with pytest.raises(ValueError, match="'nope_xyz:L' cannot be imported inside the sandbox"):
        load_runner_loader("nope_xyz:L")
    with pytest.raises(ValueError, match="lacks prepare/load/kernel_origin_violations"):
        load_runner_loader("pathlib:PurePath")


def test_a_device_backend_without_an_adapter_says_how_to_make_one():
    with pytest.raises(TypeError, match="sets no adapter; subclass DeviceBackend with `adapter = MyAdapter\\(\\)`"):
        DeviceBackend()


def test_a_device_backend_refuses_an_adapter_that_breaks_the_protocol():
    class Half:
        name, skill, kernel_suffix, language, device_kind, runner_loader = "half", "half", ".x", "X", "cuda", None

    class HalfBackend(DeviceBackend):
        adapter = Half()

    with pytest.raises(TypeError, match="HalfBackend.adapter is not a DeviceAdapter.*method availability\\(\\) is missing"):
        HalfBackend()
