"""Session 41's red team against the Triton backend (triton_cheats_s41.py): every cheat that passed the static rules
is refused with its rule now, honest Triton idioms still pass, and end to end on the CPU the cheat that was graded
correct (a torch fallback in a heuristics lambda that hid from the op audit) is rejected before it runs."""

from __future__ import annotations

import pytest
from triton_cheats_s41 import HEURISTICS_EVADE_AUDIT, HONEST_IDIOMS, STATIC_S41

from cuda_agent.harness.integrity import RULES
from triton_backend.integrity import check_triton_source


@pytest.mark.parametrize("name", sorted(STATIC_S41))
def test_red_team_cheats_are_refused_with_their_rule(name):
    source, rule = STATIC_S41[name]
    rules = [v.rule for v in check_triton_source(source).violations]
    assert rule in RULES and rule in rules, (name, rules)


@pytest.mark.parametrize("name", sorted(HONEST_IDIOMS))
def test_honest_idioms_still_pass(name):
    assert check_triton_source(HONEST_IDIOMS[name]).violations == [], name


def test_a_violation_in_a_decorator_names_its_line():
    [first, *_] = check_triton_source(HEURISTICS_EVADE_AUDIT).violations
    assert "@triton.heuristics" in HEURISTICS_EVADE_AUDIT.splitlines()[first.line - 1]


@pytest.mark.slow
def test_the_audit_evading_heuristics_lambda_is_rejected_end_to_end(cpu_backend, probed, tmp_path):
    ws = cpu_backend.prepare_workspace(probed("swish"), tmp_path / "ws")
    ws.write("model_new.py", HEURISTICS_EVADE_AUDIT)
    result = cpu_backend.verify(ws, probed("swish"))
    assert result.status.value == "rejected" and result.rule == "T1.python.decorator", (result.status, result.message[:300])


@pytest.mark.slow
def test_a_heuristics_kernel_is_still_graded_correct(cpu_backend, probed, tmp_path):
    ws = cpu_backend.prepare_workspace(probed("swish"), tmp_path / "ws")
    ws.write("model_new.py", HONEST_IDIOMS["heuristics"])
    result = cpu_backend.verify(ws, probed("swish"))
    assert result.status.value == "correct", (result.status, result.message[:300])


@pytest.mark.slow
def test_a_dtype_default_kernel_is_graded_correct(cpu_backend, probed, tmp_path):
    # Refused statically by the red team's literal-default rule until session 41's review. (The libdevice idioms are
    # graded on the GPU, examples/triton-backend/tests/test_gpu.py: Triton's interpreter returns None for them.)
    ws = cpu_backend.prepare_workspace(probed("swish"), tmp_path / "ws")
    ws.write("model_new.py", HONEST_IDIOMS["dtype_default"])
    result = cpu_backend.verify(ws, probed("swish"))
    assert result.status.value == "correct", (result.status, result.message[:300])
