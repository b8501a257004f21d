"""Hidden re-verification of a selected candidate: held-out seeds and widened inputs.

Two checks, reported separately (a candidate can pass visible checks and
fail either):

- **held-out seeds**: a fresh ``verify`` (the evaluator draws new secret
  seeds every call); seeds that also occurred in the trajectory are recorded
  as an overlap (expected empty).
- **widened inputs**: the same verify on a *widened task*: the task's code
  with its ``get_inputs`` wrapped so each floating tensor input spans
  ``factor`` times its sampled range, kept inside the input's declared domain
  (``TaskManifest.inputs[i].domain``: e.g. ``torch.rand`` inputs of an
  operator that accepts any real become ``[-4, 4)``, while the inputs of
  ``log`` stay positive). Integer, index, bool and constant inputs are left
  alone. The wrapper runs the reference on the widened inputs in the trusted
  reference process and halves the widening until the reference output is
  finite (outputs are compared only where the reference is finite); if even
  the original range gives non-finite output it raises, and the check is
  reported as inconclusive rather than failed.

The widened task goes through the backend's public ``verify``; no evaluator
hook is needed (the evaluator calls ``get_inputs`` of the task it is given).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from cuda_agent.harness.evaluation.records import HiddenCheck
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest, TensorSpec

#: Text the widened task raises when even the original range gives a non-finite reference.
NONFINITE_MARKER = "cuda-agent-widened: reference not finite"
WIDEN_BACKOFF_STEPS = 4

_WRAPPER = '''

# ---- appended by cuda-agent (trusted side): widened inputs for hidden re-verification ----
_CUDA_AGENT_WIDEN_PLAN = {plan}
_cuda_agent_original_get_inputs = get_inputs


def _cuda_agent_widen(x, plan, shrink):
    kind, a, b, lo, hi = plan
    if kind == "affine":
        # map the sampled range [a, b) onto [lo', hi'), shrunk towards the sampled range
        u = (x - a) / (b - a)
        tlo = a + (lo - a) * shrink
        thi = b + (hi - b) * shrink
        y = tlo + u * (thi - tlo)
    else:
        y = x * (1.0 + (a - 1.0) * shrink)
    if lo is not None or hi is not None:
        y = y.clamp(min=lo, max=hi)
    return y.to(x.dtype).contiguous()


def get_inputs():
    import torch as _torch

    base = list(_cuda_agent_original_get_inputs())
    devices = [_torch.cuda.current_device()] if _torch.cuda.is_available() else []
    shrink = 1.0
    for _ in range({steps}):
        xs = list(base)
        for i, plan in enumerate(_CUDA_AGENT_WIDEN_PLAN):
            if plan is not None and i < len(xs) and isinstance(xs[i], _torch.Tensor) and xs[i].is_floating_point():
                xs[i] = _cuda_agent_widen(xs[i], plan, shrink)
        with _torch.random.fork_rng(devices=devices), _torch.no_grad():
            out = Model(*get_init_inputs())(*[x.clone() if isinstance(x, _torch.Tensor) else x for x in xs])
        outs = out if isinstance(out, (tuple, list)) else [out]
        if all(bool(_torch.isfinite(o).all()) for o in outs if isinstance(o, _torch.Tensor) and o.is_floating_point()):
            return xs
        shrink *= 0.5
    raise RuntimeError("{marker} on widened inputs at any widening; check inconclusive")
'''


def _widen_plan(spec: TensorSpec, factor: float) -> tuple[list[Any] | None, str]:
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


def widened_task(task: TaskManifest, factor: float = 4.0) -> tuple[TaskManifest | None, list[str]]:
    """The task with widened inputs (id ``<id>#widened``), or None when no input can be widened.

    Needs a probed manifest (``task.inputs`` with domains); an unprobed one gives None.
    """
    plans, lines = [], []
    for spec in task.inputs:
        plan, line = _widen_plan(spec, factor)
        plans.append(plan)
        lines.append(line)
    if not any(p is not None for p in plans):
        return None, lines or ["no inputs recorded in the manifest (task not probed)"]
    code = task.code.rstrip("\n") + _WRAPPER.format(
        plan=json.dumps(plans).replace("null", "None"), steps=WIDEN_BACKOFF_STEPS, marker=NONFINITE_MARKER
    )
    data = task.model_dump()
    data.update(id=f"{task.id}#widened", code=code, meta={**task.meta, "widened_from": task.id, "widen": lines})
    data["code_hash"] = TaskManifest.from_code(data["id"], code).code_hash
    return TaskManifest.model_validate(data), lines


def _inconclusive(result: CandidateResult) -> bool:
    text = result.message + " ".join(e.message for e in result.errors)
    return result.status is Status.error and NONFINITE_MARKER in text


def hidden_check(
    backend: Any,
    workspace: Any,
    task: TaskManifest,
    *,
    trajectory_seeds: Iterable[int] = (),
    factor: float = 4.0,
) -> HiddenCheck:
    """Build the candidate in ``workspace`` and run both hidden checks through ``backend``."""
    check = HiddenCheck()
    built = backend.compile(workspace, task)
    if built.status in (Status.compile_error, Status.rejected, Status.error, Status.timeout):
        check.note = f"candidate did not rebuild for hidden checks: {built.status.value}: {built.message[:300]}"
        return check
    check.heldout = backend.verify(workspace, task)
    seen = set(trajectory_seeds)
    check.seed_overlap = sorted(seen & set(check.heldout.seeds))
    wide, lines = widened_task(task, factor)
    check.widened_inputs = lines
    if wide is None:
        check.note = "no input can be widened within its declared domain"
        return check
    result = backend.verify(workspace, wide)
    if _inconclusive(result):
        check.note = "reference not finite on widened inputs; widened check inconclusive"
        return check
    check.widened = result
    return check
