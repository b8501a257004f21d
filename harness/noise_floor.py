"""The noise floor of ordinary sets: the reference's own float32 rounding noise, measured, bounds the scale-aware atol.

The scale-aware rule (:func:`~cuda_agent.harness.compare.effective_atol`) holds an output whose RMS is far below
``atol`` to ``rtol`` times that RMS. Where the output is itself float32 rounding noise (a GroupNorm followed by a
mean: the exact value is 0 and the reference returns values of 1e-8 .. 1e-5 that depend on its summation order), that
tolerance is far below the noise: any honest kernel that sums in another order fails, an exact float64 one included,
and only the reference itself passes.

So, for an ordinary set where the rule shrinks ``atol``, the reference process measures the noise: it runs the
reference again with its floating inputs moved by :data:`~cuda_agent.harness.widening_gate.NUDGE` (2**-22 relative,
up and down in turn along the elements, then the mirror pattern; the widening gate's nudge) and takes, per output,
the largest change of a finite element. The absolute tolerance is then at least :data:`K` times that, never above the
paper's ``atol`` (an output whose shape changes under the nudge: the paper's ``atol``). It is measured from the reference alone, on pristine inputs (a set whose inputs a candidate wrote
into is not measured), so a candidate cannot move it; a well-conditioned output (a softmax over 16k columns, a
scaled copy) moves by a few float32 ulps of its own values under the nudge, far below ``rtol`` of its RMS, and keeps
the scale-aware tolerance. Sets whose inputs and outputs exceed
:data:`~cuda_agent.harness.widening_gate.GATE_MAX_BYTES` are not measured (a second copy of each would not fit the
memory plan of the largest KernelBench tasks): there the rule is as before.

Evidence for K (float64 candidates, reduced KernelBench level2/23, 37, 62, 88 and 94 on the CPU, two seeds each):
the float64 output differs from the reference by 0.55 to 0.99 times the measured response; an honest float32 kernel
is off the exact value about as much as the reference is, so up to about twice that: K = 4 leaves a factor 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

#: The floor is this many times the reference's largest response to the nudge.
K = 4.0


def nudge_response(torch: Any, model: Any, inputs: list[Any], expected: list[Any], outputs: list[int]
                   ) -> dict[int, float] | None:
    """Per position in ``outputs``: the largest change of a finite element of the reference's output under the
    nudge, over both patterns (None: the set is too large to measure)."""
    from cuda_agent.harness.compare import _CHUNK
    from cuda_agent.harness.widening_gate import GATE_MAX_BYTES, _bytes, nudge_inputs

    if _bytes(torch, expected) + _bytes(torch, inputs) > GATE_MAX_BYTES:
        return None
    response = {i: 0.0 for i in outputs}
    for sign in (1.0, -1.0):
        with torch.no_grad():
            moved = model(*nudge_inputs(torch, inputs, [True] * len(inputs), sign))
        moved = list(moved) if isinstance(moved, (tuple, list)) else [moved]
        for i in outputs:
            e, o = expected[i], moved[i] if i < len(moved) else None
            if not isinstance(o, torch.Tensor) or o.shape != e.shape:
                response[i] = math.inf  # the reference's output is not even stable in shape: no scale to hold to
                continue
            fe, fo = e.detach().reshape(-1), o.detach().reshape(-1)
            for start in range(0, fe.numel(), _CHUNK):
                ec, oc = fe[start : start + _CHUNK].double(), fo[start : start + _CHUNK].double()
                diff = torch.where(torch.isfinite(ec) & torch.isfinite(oc), (oc - ec).abs(), torch.zeros_like(ec))
                response[i] = max(response[i], float(diff.max()))
        del moved
    return response


def noise_floors(torch: Any, model: Any, held: Any, tolerances: dict[str, Any], intact: Callable[[], bool]
                 ) -> dict[int, float]:
    """The absolute tolerance floor of each floating output of ordinary set ``held`` whose scale-aware atol is
    below the paper's (``K`` times its nudge response; kept in ``held.noise``, measured on its first check).
    ``intact()``: the set's inputs still match their fingerprints (else nothing is measured: no floor; asked only
    when a floor is to be measured)."""
    from cuda_agent.harness.compare import effective_atol, reference_rms

    if held.noise is not None:
        return held.noise
    shrunk: dict[int, float] = {}  # position -> the paper's atol
    for i, e in enumerate(held.expected):
        if not isinstance(e, torch.Tensor) or not e.is_floating_point() or e.numel() == 0:
            continue
        atol, rtol = tolerances.get(str(e.dtype).removeprefix("torch."), tolerances["*"])
        if i not in held.rms:
            held.rms[i] = reference_rms(e)
        if effective_atol(atol, rtol, held.rms[i]) < atol:
            shrunk[i] = atol
    if not shrunk or not intact():
        held.noise = {}
        return held.noise
    response = nudge_response(torch, model, held.inputs, held.expected, list(shrunk))
    held.noise = {} if response is None else {i: min(K * r, shrunk[i]) for i, r in response.items()}
    return held.noise
