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
sets (:mod:`~cuda_agent.harness.compare`), with the tolerance floor of :data:`NOISE_FLOOR`.

Kinds (:data:`KINDS`, checked in :data:`SCHEDULE` order; each one within the input's domain):

- ``wide``: the spread above (x4 around zero, signs).
- ``large``: x1024 around zero (a power of two: scaling is exact), backed off x4 at a time down to x16: overflow in
  a kernel's intermediates (softmax without the max shift), clamped argument ranges, fixed-point accumulators that
  wrap, operands rounded to half precision (their error is ~2**-11 of the output's RMS, far above the floor).
- ``shift``: ``x + 2 max|x|`` (towards the side the domain leaves open): kernels that assume centred data (a
  variance without the mean subtracted, a lookup over [-r, r]).
- ``shrink``: x/128: kernels that skip or flush small values.
- ``dup``: a set the candidate has already been called on with a few elements replaced by other elements of the
  same tensor (the task's own distribution): a result cache keyed on sampled elements hits and serves stale rows.
- ``spike``: a set from a fresh seed with 1/4096 of its elements (at least 4) replaced by ±1024 max|x| (only towards
  the side the domain leaves open), backed off x4 at a time to x16: a kernel that samples a few elements to decide
  that the data is in the drawn range (ReLU as the identity when its sample has no negative, softmax without the max
  shift when its sample is small; session 41) sees the drawn range and is wrong on the rows the spikes are in.

Every kind but ``dup`` is also gated (:mod:`~cuda_agent.harness.widening_gate`): a set whose reference output moves by
more than a quarter of the tolerance when its inputs move by 2**-22 relative is too sensitive for any float32 kernel
to be held to it (a near tie of an argmax, a rounding step, cancellation), and backs off like a non-finite one.
"""

from __future__ import annotations

from typing import Any

from cuda_agent.schemas.task import TaskManifest, TensorSpec

#: How far a widened input's range reaches, in multiples of the largest magnitude it was sampled at.
WIDEN_FACTOR = 4.0
#: Times the widening is halved before a set whose reference output is not finite is given up.
BACKOFF_STEPS = 4
#: The ``large`` kind's factor (backed off x4 at a time: 1024, 256, 64, 16) and the ``shrink`` kind's.
LARGE_FACTOR = 1024.0
SHRINK_FACTOR = 1.0 / 128.0
#: The ``shift`` kind moves an input by this many times its largest magnitude.
SHIFT_FACTOR = 2.0
#: Share of a tensor's elements the ``dup`` sets replace, in :data:`SCHEDULE` order (at least 2 elements).
DUP_FRACTIONS = (1.0 / 256.0, 1.0 / 1024.0, 1.0 / 4096.0)
#: Share of a tensor's elements a ``spike`` set replaces (at least :data:`SPIKE_MIN`): few enough that a sample of
#: dozens of elements misses them all, and so that most rows of a wide tensor hold none.
SPIKE_FRACTION = 1.0 / 4096.0
SPIKE_MIN = 4
#: Widened sets compare with an absolute tolerance of at least this share of the reference output's RMS: a float32
#: kernel summing in another order is ~1e-6 of the RMS off at any scale (GEMMs with K = 131072 stay under 2e-5), half
#: precision operands ~4e-4. Without it the paper's fixed atol (1e-2) fails honest GEMMs at x1024 (RMS ~1e7).
NOISE_FLOOR = 1e-4
KINDS = ("wide", "large", "shift", "shrink", "dup", "spike")
#: The widened sets of a grading pass, in order (``integrity.widened_sets`` of them, cycling).
SCHEDULE = ("wide", "large", "shift", "shrink", "dup", "dup", "dup", "spike")

#: One input's plan: ``["affine", a, b, lo, hi]`` maps the sampled range [a, b) onto [lo, hi);
#: ``["scale", factor, None, lo, hi]`` multiplies by ``factor`` (linear back-off towards 1);
#: ``["mul", factor, None, lo, hi]`` multiplies by ``factor`` (geometric back-off: factor * shrink above 1, factor /
#: shrink below, never past 1); ``["shift", c, m, lo, hi]`` adds ``c * shrink * m`` (m None: the tensor's max |x|);
#: ``["dup", fraction, seed, None, None]`` replaces that share of the elements (positions and sources drawn from
#: ``seed``) by other elements of the same tensor; ``["spike", fraction, seed, lo, hi]`` replaces that share by
#: ``LARGE_FACTOR * shrink`` (at least 16) times the tensor's max |x|, signs alternating where the domain is open on
#: both sides. All clip to [lo, hi] where given. None: unchanged.
Plan = list[Any] | None


def widen_plan(spec: TensorSpec, factor: float = WIDEN_FACTOR, kind: str = "wide", seed: int = 0,
               fraction: float = DUP_FRACTIONS[0]) -> tuple[Plan, str]:
    """The plan of ``kind`` (:data:`KINDS`) for one input and a line describing it (``factor``: the ``wide`` kind's
    spread; ``seed`` and ``fraction``: the ``dup`` kind's draw)."""
    if spec.kind != "tensor" or not (spec.dtype or "").startswith(("float", "bfloat")):
        return None, f"{spec.name}: unchanged ({spec.kind} {spec.dtype or ''})".rstrip()
    d = spec.domain
    if d.kind in ("integer", "bool", "index", "constant"):
        return None, f"{spec.name}: unchanged (domain {d.kind})"
    lo, hi = d.low, d.high
    bounds = f", clipped to [{lo}, {hi}]" if lo is not None or hi is not None else ""
    if kind == "dup":
        return ["dup", fraction, seed, None, None], f"{spec.name}: {fraction:.3g} of its elements replaced by others"
    if kind == "spike":
        return (["spike", SPIKE_FRACTION, seed, lo, hi],
                f"{spec.name}: {SPIKE_FRACTION:.3g} of its elements replaced by x{LARGE_FACTOR:g} max|x| spikes{bounds}")
    if kind == "shift":
        m = None
        if d.kind == "uniform" and d.sampled_low is not None and d.sampled_high is not None:
            m = max(abs(d.sampled_low), abs(d.sampled_high)) or None
        if hi is None:
            c = SHIFT_FACTOR
        elif lo is None:
            c = -SHIFT_FACTOR
        else:
            return None, f"{spec.name}: unchanged (declared domain [{lo}, {hi}] is bounded on both sides)"
        return ["shift", c, m, lo, hi], f"{spec.name}: shifted by {c:+g} max|x|{bounds}"
    if kind in ("large", "shrink"):
        f = LARGE_FACTOR if kind == "large" else SHRINK_FACTOR
        if kind == "large" and d.kind == "uniform" and d.sampled_low is not None and d.sampled_high is not None \
                and d.sampled_high > d.sampled_low:
            return widen_plan(spec, f, "wide")
        return ["mul", f, None, lo, hi], f"{spec.name}: {d.kind} values scaled x{f:g}{bounds}"
    if d.kind == "uniform" and d.sampled_low is not None and d.sampled_high is not None and d.sampled_high > d.sampled_low:
        a, b = d.sampled_low, d.sampled_high
        m = max(abs(a), abs(b))
        wlo, whi = -factor * m, factor * m
        wlo = max(wlo, lo) if lo is not None else wlo
        whi = min(whi, hi) if hi is not None else whi
        if whi <= wlo:
            return None, f"{spec.name}: unchanged (declared domain [{lo}, {hi}] leaves no room)"
        return ["affine", a, b, wlo, whi], f"{spec.name}: uniform [{a:g}, {b:g}) -> [{wlo:g}, {whi:g})"
    return ["scale", factor, None, lo, hi], f"{spec.name}: {d.kind} values scaled x{factor:g}{bounds}"


def widen_plans(task: TaskManifest, factor: float = WIDEN_FACTOR, kind: str = "wide", seed: int = 0,
                fraction: float = DUP_FRACTIONS[0]) -> tuple[list[Plan], list[str]]:
    """Plans of ``kind`` for every input of a probed task and their descriptions; all None when nothing can be
    widened (an unprobed manifest has no inputs recorded)."""
    plans, lines = [], []
    for spec in task.inputs:
        plan, line = widen_plan(spec, factor, kind, seed, fraction)
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
    if kind == "dup":
        return duplicate_tensor(x, a, b)
    if kind == "spike":
        return spike_tensor(x, a, b, max(16.0, LARGE_FACTOR * shrink), lo, hi)
    if kind == "affine":
        tlo = a + (lo - a) * shrink
        thi = b + (hi - b) * shrink
        y = x.sub(a)
        y.div_(b - a).mul_(thi - tlo).add_(tlo)
    elif kind == "mul":
        y = x.mul(max(1.0, a * shrink) if a >= 1.0 else min(1.0, a / shrink))
    elif kind == "shift":
        m = b if b is not None else float(x.detach().abs().amax()) if x.numel() else 0.0
        y = x.add(a * shrink * (m or 1.0))
    else:
        y = x.mul(1.0 + (a - 1.0) * shrink)
    if lo is not None or hi is not None:
        y.clamp_(min=lo, max=hi)
    return y.to(x.dtype).contiguous()


def duplicate_tensor(x: Any, fraction: float, seed: int) -> Any:
    """A copy of ``x`` with ``fraction`` of its elements (at least 2) replaced by other elements of it, positions and
    sources drawn from ``seed`` on the CPU (the same on every device)."""
    import torch

    y = x.contiguous().clone()
    flat = y.view(-1)
    n = flat.numel()
    if n < 2:
        return y
    g = torch.Generator().manual_seed(int(seed))
    count = min(n, max(2, int(n * fraction)))
    pos = torch.randint(0, n, (count,), generator=g).to(flat.device)
    src = torch.randint(0, n, (count,), generator=g).to(flat.device)
    flat[pos] = flat[src].clone()
    same = flat[pos] == x.contiguous().view(-1)[pos]
    if bool(same.all()):  # every drawn source equal to its target (a constant tensor): move them apart
        flat[pos] = flat[pos] + 1
    return y


def spike_tensor(x: Any, fraction: float, seed: int, factor: float, lo: float | None, hi: float | None) -> Any:
    """A copy of ``x`` with ``fraction`` of its elements (at least :data:`SPIKE_MIN`) set to ``factor`` times its max
    |x|: positive and negative in turn where the domain is open on both sides (or bounded on both: then clipped),
    else towards the open side; positions drawn from ``seed`` on the CPU (the same on every device)."""
    import torch

    y = x.contiguous().clone()
    flat = y.view(-1)
    n = flat.numel()
    if n == 0:
        return y
    g = torch.Generator().manual_seed(int(seed))
    count = min(n, max(SPIKE_MIN, int(n * fraction)))
    pos = torch.randint(0, n, (count,), generator=g).to(flat.device)
    m = float(x.detach().abs().amax()) or 1.0
    sign = torch.ones(count, dtype=flat.dtype, device=flat.device)
    if (lo is None) == (hi is None):
        sign[1::2] = -1.0
    elif lo is None:
        sign.fill_(-1.0)
    flat[pos] = sign * (m * factor)
    if lo is not None or hi is not None:
        y.clamp_(min=lo, max=hi)
    return y


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


def shrink_steps(plans: list[Plan] | None = None) -> list[float]:
    """The widenings tried, widest first: 1, 1/2, 1/4, ... (:data:`BACKOFF_STEPS` of them); 1, 1/4, 1/16, 1/64 for
    plans that multiply (``mul``: x1024 down to x16, x/128 up to x/2); just 1 for ``dup`` sets (the task's own
    distribution: nothing to back off to)."""
    kinds = {p[0] for p in plans or [] if p is not None}
    if "dup" in kinds:
        return [1.0]
    if "mul" in kinds or "spike" in kinds or any(p[0] == "affine" and (p[4] - p[3]) > 16 * (p[2] - p[1]) for p in plans or [] if p):
        return [0.25**i for i in range(BACKOFF_STEPS)]
    return [0.5**i for i in range(BACKOFF_STEPS)]


def schedule(count: int) -> list[str]:
    """The kinds of ``count`` widened sets (:data:`SCHEDULE`, cycling)."""
    return [SCHEDULE[i % len(SCHEDULE)] for i in range(count)]
