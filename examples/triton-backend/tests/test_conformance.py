"""triton-backend through cuda-agent's conformance kit, as a publisher runs it in their own CI: the adapter and
its runner loader, the skill registered for the backend, the honest swish solution verified, and every runtime
cheat fixture failing verify (on a machine without a GPU: Triton's interpreter)."""

from __future__ import annotations

import pytest
from triton_cheats import RUNTIME
from triton_support import honest

from cuda_agent import HOOKSPEC_VERSION
from cuda_agent.plugin_manager import PluginManager, hookspec_mismatch
from cuda_agent.testing import check_adapter, check_backend, check_skill
from triton_backend import plugin
from triton_backend.adapter import TritonAdapter, TritonBackend, TritonConfig


def test_loaded_through_its_entry_point():
    pm = PluginManager()
    info = {p.name: p for p in pm.plugins()}
    assert info["triton"].distribution == "triton-backend"
    assert info["triton"].components == ("backend:triton", "skill:triton")
    assert pm.registry.get("skill", "triton").backend == "triton"
    assert hookspec_mismatch(plugin.CUDA_AGENT_HOOKSPEC_VERSION, HOOKSPEC_VERSION) is None
    assert "triton" in pm.doctor_checks() and pm.doctor_checks()["triton"]["ok"]


@pytest.mark.parametrize("device_kind", ["cpu", "cuda"])
def test_adapter_conforms(device_kind):
    check_adapter(TritonAdapter(device_kind))


def test_skill_conforms():
    text = check_skill(TritonBackend(TritonConfig(device="cpu")))
    assert text.startswith("# Skill: writing fast, honest Triton kernels") and "kernel[grid]" in text


def test_interpret_setting_picks_the_device():
    assert TritonBackend(TritonConfig(device="cpu")).kind == "cpu"
    assert TritonBackend(TritonConfig(device="cuda")).kind == "cuda"


@pytest.mark.slow
def test_backend_conforms_with_honest_and_cheating_solutions(cpu_backend, probed):
    cheats = {"return_the_input": {"model_new.py": RUNTIME["return_the_input"][1]}}  # all three: test_cpu_end_to_end
    result = check_backend(cpu_backend, probed("swish"), solution=honest("swish"), evaluate=True, cheats=cheats)
    assert result is not None and result.phase == "verify" and result.status.value == "correct"
    assert result.provenance.backend == "triton"
