"""Widened input sets: the task's own inputs stretched within each input's declared domain.

A kernel specialised to the task's input distribution (ReLU as the identity
because ``torch.rand`` never draws a negative; a branch the task's inputs never
take, simply dropped) passes every check made on that distribution. So the
trusted grading pass also checks the candidate on sets whose floating inputs
span ``factor`` times their sampled range, with signs, kept inside the domain
the task declares or implies (``TaskManifest.inputs[i].domain``: the inputs of
``log`` stay positive, those of ``acos`` stay in [-1, 1]). Integer, index,
bool and constant inputs are left alone.

The reference process makes a widened set from an ordinary seed, widens it
(:func:`widen_inputs`) and runs the reference on it; where the reference
output is not finite it halves the widening (:data:`BACKOFF_STEPS` times) and
gives the set up if even the mildest widening is not finite: such a set is
*inconclusive*, never a failure. Outputs are compared exactly as on ordinary
sets (:mod:`~cuda_agent.harness.compare`).
"""

from __future__ import annotations

from typing import Any

from cuda_agent.schemas.task import TaskManifest, TensorSpec

#: How far a widened input's range reaches, in multiples of the largest magnitude it was sampled at.
WIDEN_FACTOR = 4.0
#: Times the widening is halved before a set whose reference output is not finite is given up.
BACKOFF_STEPS = 4

#: One input's plan: ``["affine", a, b, lo, hi]`` maps the sampled range [a, b) onto [lo, hi);
#: ``["scale", factor, None, lo, hi]`` multiplies by ``factor``; both clip to [lo, hi] where given. None: unchanged.
Plan = list[Any] | None


def widen_plan(spec: TensorSpec, factor: float = WIDEN_FACTOR) -> tuple[Plan, str]:
    """The plan for one input and a line describing it."""
    if spec.kind != "tensor" or not (spec.dtype or "").startswith(("float", "bfloat")):
        return None, f"{spec.name}: unchanged ({spec.kind} {spec.dtype or ''})".rstrip()
    d = spec.domain
    if d.kind in ("integer", "bool", "index", "constant"):
        return None, f"{spec.name}: unchanged (domain {d.kind})"
    if d.kind == "uniform" and d.sampled_low is not None and d.sampled_high is not None and d.sampled_high > d.sampled_low:
        a, b = d.sampled_low, d.sampled_high
        m = max(abs(a), abs(b))
        lo, hi = -factor * m, factor * m
        lo = max(lo, d.low) if d.low is not None else lo
        hi = min(hi, d.high) if d.high is not None else hi
        if hi <= lo:
            return None, f"{spec.name}: unchanged (declared domain [{d.low}, {d.high}] leaves no room)"
        return ["affine", a, b, lo, hi], f"{spec.name}: uniform [{a:g}, {b:g}) -> [{lo:g}, {hi:g})"
    lo, hi = d.low, d.high
    bounds = f", clipped to [{lo}, {hi}]" if lo is not None or hi is not None else ""
    return ["scale", factor, None, lo, hi], f"{spec.name}: {d.kind} values scaled x{factor:g}{bounds}"


def widen_plans(task: TaskManifest, factor: float = WIDEN_FACTOR) -> tuple[list[Plan], list[str]]:
    """Plans for every input of a probed task and their descriptions; all None when nothing can be widened
    (an unprobed manifest has no inputs recorded)."""
    plans, lines = [], []
    for spec in task.inputs:
        plan, line = widen_plan(spec, factor)
        plans.append(plan)
        lines.append(line)
    return plans, lines or ["no inputs recorded in the manifest (task not probed)"]


def can_widen(plans: list[Plan]) -> bool:
    """At least one input changes."""
    return any(p is not None for p in plans)


def widen_tensor(x: Any, plan: list[Any], shrink: float) -> Any:
    """``x`` under one plan, the widening scaled by ``shrink`` (1 = full, towards 0 = the sampled range).

    One new tensor is allocated and every later step works in place on it (``x`` is never written): a widened
    8 GiB input costs one more input's worth while it is made, not four (the out-of-place chain's temporaries ran a
    KernelBench reduction's reference out of device memory). The arithmetic is the out-of-place chain's, op for op.
    """
    kind, a, b, lo, hi = plan
    if kind == "affine":
        tlo = a + (lo - a) * shrink
        thi = b + (hi - b) * shrink
        y = x.sub(a)
        y.div_(b - a).mul_(thi - tlo).add_(tlo)
    else:
        y = x.mul(1.0 + (a - 1.0) * shrink)
    if lo is not None or hi is not None:
        y.clamp_(min=lo, max=hi)
    return y.to(x.dtype).contiguous()


def widen_inputs(torch: Any, inputs: list[Any], plans: list[Plan], shrink: float, *, consume: bool = False) -> list[Any]:
    """The inputs with every floating tensor that has a plan widened (others are the same objects): a new list, or
    with ``consume`` the given one, each entry replaced as soon as its widened tensor exists (the caller's pristine
    tensor is then freed one input at a time instead of all living until the end)."""
    out = inputs if consume else list(inputs)
    for i, plan in enumerate(plans):
        if plan is not None and i < len(out) and isinstance(out[i], torch.Tensor) and out[i].is_floating_point():
            out[i] = widen_tensor(out[i], plan, shrink)
    return out


def finite_outputs(torch: Any, outputs: Any) -> bool:
    """Every floating tensor among ``outputs`` (a tensor or a tuple/list of them) is finite."""
    outs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return all(bool(torch.isfinite(o).all()) for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point())


def shrink_steps() -> list[float]:
    """The widenings tried, widest first: 1, 1/2, 1/4, ... (:data:`BACKOFF_STEPS` of them)."""
    return [0.5**i for i in range(BACKOFF_STEPS)]
