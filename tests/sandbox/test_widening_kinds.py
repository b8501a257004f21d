"""The widened sets' kinds (harness/widening.py), the sensitivity gate (harness/widening_gate.py), the tolerance
floor of widened sets (harness/compare.py) and the module-state digest (harness/module_state.py): real torch."""

from __future__ import annotations

import torch

from cuda_agent.harness.compare import compare_output
from cuda_agent.harness.module_state import changed_parts, state_carried, state_digest
from cuda_agent.harness.reference_sets import HeldSets
from cuda_agent.harness.widening import (NOISE_FLOOR, schedule, shrink_steps, widen_inputs, widen_plan)
from cuda_agent.harness.widening_gate import sensitive
from cuda_agent.schemas.task import InputDomain, TensorSpec


def _spec(kind: str, low=None, high=None, s_lo=-4.0, s_hi=4.0, dtype="float32") -> TensorSpec:
    return TensorSpec(name="input0", kind="tensor", shape=[64], dtype=dtype,
                      domain=InputDomain(kind=kind, low=low, high=high, sampled_low=s_lo, sampled_high=s_hi))


def _x(n: int = 4096) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(0))


def test_large_scales_exactly_by_powers_of_two_and_backs_off_geometrically() -> None:
    plan, line = widen_plan(_spec("normal"), kind="large")
    assert plan[0] == "mul" and "x1024" in line
    x = _x()
    steps = shrink_steps([plan])
    assert steps == [1.0, 0.25, 0.0625, 0.015625]
    for s, f in zip(steps, (1024, 256, 64, 16)):
        (y,) = widen_inputs(torch, [x], [plan], s)
        assert torch.equal(y, x * f)  # exact: no new ties, no rounding


def test_large_uniform_inputs_span_a_thousand_times_their_range_within_the_domain() -> None:
    plan, _ = widen_plan(_spec("uniform", s_lo=0.0, s_hi=1.0), kind="large")
    (y,) = widen_inputs(torch, [torch.rand(10000)], [plan], 1.0)
    assert float(y.min()) < -900 and float(y.max()) > 900
    plan, _ = widen_plan(_spec("uniform", low=0.0, s_lo=0.0, s_hi=1.0), kind="large")  # the inputs of log
    (y,) = widen_inputs(torch, [torch.rand(10000)], [plan], 1.0)
    assert float(y.min()) >= 0.0 and float(y.max()) > 900


def test_shift_moves_towards_the_open_side_and_shrink_divides() -> None:
    x = _x()
    plan, _ = widen_plan(_spec("normal"), kind="shift")
    (y,) = widen_inputs(torch, [x], [plan], 1.0)
    assert torch.allclose(y, x + 2 * float(x.abs().max()))
    plan, _ = widen_plan(_spec("normal", high=0.0, s_hi=0.0), kind="shift")  # bounded above: shifted down
    (y,) = widen_inputs(torch, [-x.abs()], [plan], 1.0)
    assert float(y.max()) <= 0.0 and float(y.mean()) < -8
    assert widen_plan(_spec("normal", low=-1.0, high=1.0), kind="shift")[0] is None  # bounded both sides: unchanged
    plan, _ = widen_plan(_spec("normal"), kind="shrink")
    (y,) = widen_inputs(torch, [x], [plan], 1.0)
    assert torch.equal(y, x / 128)
    assert widen_plan(_spec("integer"), kind="large")[0] is None
    assert widen_plan(_spec("constant"), kind="shift")[0] is None


def test_dup_replaces_a_few_elements_by_others_of_the_same_tensor() -> None:
    x = _x(16384)
    plan, _ = widen_plan(_spec("normal"), kind="dup", seed=5, fraction=1 / 1024)
    (y,) = widen_inputs(torch, [x], [plan], 1.0)
    (again,) = widen_inputs(torch, [x], [plan], 1.0)
    assert torch.equal(y, again)  # determined by the plan's seed: a set made again is the same
    changed = (y != x).sum().item()
    assert 1 <= changed <= 16 and set(y.tolist()) <= set(x.tolist())  # values from the tensor itself: in its domain
    assert shrink_steps([plan]) == [1.0]
    assert schedule(9)[:7] == ["wide", "large", "shift", "shrink", "dup", "dup", "dup"]


def test_the_floor_passes_a_float64_gemm_at_x1024_and_fails_half_precision_operands() -> None:
    g = torch.Generator().manual_seed(1)
    a = torch.rand(64, 4096, generator=g) * 2048 - 1024
    w = torch.rand(4096, 128, generator=g) * 2048 - 1024
    ref = a @ w
    exact = (a.double() @ w.double()).float()
    # The paper's fixed atol fails an exact kernel here (the reference's own rounding is ~10 at RMS ~4e7) ...
    assert compare_output(ref, exact, atol=1e-2, rtol=1e-2)
    # ... the floor does not, and still fails operands rounded to half precision.
    assert not compare_output(ref, exact, atol=1e-2, rtol=1e-2, floor=NOISE_FLOOR)
    half = (a.half().float() @ w.half().float())
    assert compare_output(ref, half, atol=1e-2, rtol=1e-2, floor=NOISE_FLOOR)


def test_gate_passes_smooth_outputs_and_stops_discontinuous_ones() -> None:
    x = _x(1 << 14).reshape(64, 256) * 1024
    plans = [["mul", 1024.0, None, None, None]]
    smooth = torch.softmax
    assert sensitive(torch, lambda v: smooth(v, -1), [x], plans, [smooth(x, -1)], (1e-2, 1e-2), NOISE_FLOOR) is None
    ties = torch.zeros(64, 256)
    ties[:, 3] = ties[:, 6] = 1.0  # an argmax over exact ties: any rounding difference may pick the other index
    argmax = lambda v: v.argmax(-1)  # noqa: E731
    why = sensitive(torch, argmax, [ties], plans, [argmax(ties)], (1e-2, 1e-2), NOISE_FLOOR)
    assert why is not None and "nudge" in why
    halves = (torch.arange(1 << 14).reshape(64, 256) % 7 + 0.5) * 1024  # a rounding step right at the values
    rounded = lambda v: torch.round(v / 1024)  # noqa: E731
    assert sensitive(torch, rounded, [halves], plans, [rounded(halves)], (1e-2, 1e-2), NOISE_FLOOR) is not None
    # At a scale where the step is far below the tolerance floor, rounding is harmless.
    big = lambda v: torch.round(v * 1e3)  # noqa: E731
    assert sensitive(torch, big, [x], plans, [big(x)], (1e-2, 1e-2), NOISE_FLOOR) is None


class _Argmax(torch.nn.Module):
    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return v.argmax(-1)


def _ties() -> list[torch.Tensor]:
    x = torch.zeros(64, 256)
    x[:, 3] = x[:, 6] = 1.0
    return [x]


def test_a_set_sensitive_at_every_widening_is_inconclusive_and_a_remake_keeps_its_widening() -> None:
    model = _Argmax()
    sets = HeldSets(torch, _ties, model, torch.device("cpu"))
    plan, _ = widen_plan(_spec("normal"), kind="large")
    assert sets.make(0, 7, [plan], (1e-2, 1e-2)) is None
    assert sets.gate_notes and all(n for n in sets.gate_notes)
    sm = lambda v: torch.softmax(v, -1)  # noqa: E731
    sets = HeldSets(torch, lambda: [torch.randn(64, 256)], sm, torch.device("cpu"))
    held = sets.make(1, 7, [plan], (1e-2, 1e-2))
    assert held is not None and held.shrink == 1.0
    again = sets.make(2, 7, [plan], shrink_at=held.shrink)
    assert torch.equal(again.inputs[0], held.inputs[0])


class _Scratch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scratch", torch.zeros(8))
        self.bn = torch.nn.BatchNorm1d(8)
        self.cache: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, keep: bool = False) -> torch.Tensor:
        self.scratch.copy_(x[:8])  # rewritten by every call: a function of the last input only
        if keep:
            self.cache.append(x.clone())
        return self.bn(x.reshape(-1, 8))


def test_module_state_digest_allows_scratch_and_running_stats_and_names_a_cache() -> None:
    m = _Scratch()
    a, b = torch.randn(64), torch.randn(64)
    m(a)
    first = state_digest(m, torch)[1]
    m(b)
    m(a)
    assert state_carried(first, state_digest(m, torch)[1]) == []  # BatchNorm's running stats changed: left out
    m(b, keep=True)
    m(a)
    after = state_digest(m, torch)[1]
    assert changed_parts(first, after) == [".cache#len", ".cache[0]"]
    (v,) = state_carried(first, after)
    assert v.rule == "T12.runtime.module_state_carried" and ".cache" in v.message


def _honest_ops() -> dict[str, tuple]:
    g = torch.Generator().manual_seed(3)
    lin = torch.nn.Linear(4096, 64)
    return {
        "gemm_k4096": (lambda x: torch.nn.functional.linear(x, lin.weight.to(x.dtype), lin.bias.to(x.dtype)),
                       lambda: [torch.randn(32, 4096, generator=g)]),
        "softmax": (lambda x: torch.softmax(x, -1), lambda: [torch.randn(16, 4096, generator=g)]),
        "layer_norm": (lambda x: torch.nn.functional.layer_norm(x, (4096,)),
                       lambda: [torch.randn(16, 4096, generator=g)]),
        "row_sum": (lambda x: x.sum(-1), lambda: [torch.randn(16, 65536, generator=g)]),
        "cumsum": (lambda x: torch.cumsum(x, -1), lambda: [torch.randn(8, 8192, generator=g)]),
        "mse_loss": (lambda p, t: torch.nn.functional.mse_loss(p, t),
                     lambda: [torch.randn(256, 1024, generator=g), torch.randn(256, 1024, generator=g)]),
        "log_softmax": (lambda x: torch.log_softmax(x, -1), lambda: [torch.randn(16, 4096, generator=g)]),
    }


def test_float64_accurate_kernels_pass_every_kind_of_widened_set() -> None:
    """A kernel that computes exactly (float64, rounded once) differs from the float32 reference by the reference's
    own rounding, as a float32 kernel summing in another order does: no kind, at its widening, may fail it."""
    spec = _spec("normal")
    for name, (fn, make) in _honest_ops().items():
        n_in = len(make())
        sets = HeldSets(torch, make, fn, torch.device("cpu"))
        for j, kind in enumerate(("wide", "large", "shift", "shrink", "dup")):
            plan, _ = widen_plan(spec, kind=kind, seed=9)
            held = sets.make(j, 100 + j, [plan] * n_in, (1e-2, 1e-2))
            if held is None:
                continue
            exact = fn(*[x.double() for x in held.inputs]).float()
            errs = compare_output(held.expected[0], exact, atol=1e-2, rtol=1e-2, floor=NOISE_FLOOR)
            assert not errs, (name, kind, errs[0].message)
