"""The sensitivity gate of widened sets: is the reference's output stable enough here to hold a kernel to it?

A widened set moves the inputs where the task's own sets never go. Some outputs are not continuous there, or not at
float32's resolution: an argmax with a near tie, a ``round`` or a comparison of a computed value, a sum that cancels
to far below its terms. An honest float32 kernel that rounds differently from the reference (another summation order)
can then differ by more than the tolerance, and a failure there would be a false rejection.

So the reference process runs the reference a second time on the widened inputs moved by 2**-22 relative (a few
float32 ulps, up and down in turn: what a different rounding of the inputs' first uses does) and compares the two
outputs with a quarter of the tolerance the candidate will be held to. When they differ the set is *sensitive*: the
widening backs off as for a non-finite output, and a set sensitive at every step is inconclusive (never a failure).
Sets above :data:`GATE_MAX_BYTES` of inputs and outputs are not gated (a second copy of each would not fit the
memory plan of the largest KernelBench tasks); they are compared with the tolerance floor alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Relative size of the move of the inputs.
NUDGE = 2.0**-22
#: Share of the tolerance the reference may move by under the nudge.
MARGIN = 0.25
#: Sets whose inputs and outputs together exceed this many bytes are not gated (the nudged copies would not fit).
GATE_MAX_BYTES = 1 << 30


def nudge_inputs(torch: Any, inputs: list[Any], plans: list[Any], sign: float = 1.0) -> list[Any]:
    """Copies of the widened floating inputs moved by :data:`NUDGE` relative, up and down in turn along their
    elements (``sign`` -1: down and up; others unchanged; one copy per input, no other temporaries)."""
    out = []
    for x, plan in zip(inputs, list(plans) + [None] * (len(inputs) - len(plans))):
        if plan is None or not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            out.append(x)
            continue
        y = x.detach().clone(memory_format=torch.contiguous_format)
        flat = y.view(-1)
        flat[0::2].mul_(1.0 + sign * NUDGE)
        flat[1::2].mul_(1.0 - sign * NUDGE)
        out.append(y)
    return out


def _bytes(torch: Any, values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def sensitive(torch: Any, model: Callable[..., Any], inputs: list[Any], plans: list[Any], expected: list[Any],
              tolerance: tuple[float, float], floor: float) -> str | None:
    """Why the reference output on ``inputs`` is too sensitive to grade a kernel on (None: it is not, or the set is
    too large to gate)."""
    from cuda_agent.harness.compare import _CHUNK, effective_atol, reference_rms

    if _bytes(torch, expected) + _bytes(torch, inputs) > GATE_MAX_BYTES:
        return None
    atol, rtol = tolerance
    with torch.no_grad():
        moved = model(*nudge_inputs(torch, inputs, plans))
    moved = list(moved) if isinstance(moved, (tuple, list)) else [moved]
    for i, (e, o) in enumerate(zip(expected, moved)):
        if not isinstance(e, torch.Tensor) or not isinstance(o, torch.Tensor) or e.shape != o.shape:
            continue
        if not (e.is_floating_point() or e.is_complex()):
            n = int((e != o).sum())
            if n:
                return f"output {i}: {n} of {e.numel()} elements change under a {NUDGE:.2g} relative nudge"
            continue
        rms = reference_rms(e)
        tol_abs = max(effective_atol(atol, rtol, rms), floor * rms)
        fe, fo = e.detach().reshape(-1), o.detach().reshape(-1)
        n = 0
        for start in range(0, fe.numel(), _CHUNK):
            ec, oc = fe[start : start + _CHUNK].double(), fo[start : start + _CHUNK].double()
            finite = torch.isfinite(ec)
            bad = finite & ((oc - ec).abs() > MARGIN * (tol_abs + rtol * ec.abs()))
            bad |= ~finite & (oc != ec)
            n += int(bad.sum())
        if n:
            return (f"output {i}: {n} of {e.numel()} elements move by more than a quarter of the tolerance under a "
                    f"{NUDGE:.2g} relative nudge of the inputs")
    return None
