"""Output checks of the trusted side: type, dtype, shape, device, NaN, tolerance.

Runs in the trusted reference process, on the device where the outputs live
(the GPU on CUDA), against expected outputs the candidate never sees.

The tolerance is scale-aware (:func:`effective_atol`): the paper's rule
``|actual - expected| <= atol + rtol * |expected|`` is the floor, and where
the reference's own values are small against ``atol`` the absolute term
shrinks to ``rtol`` times their RMS magnitude. Otherwise an output far below
``atol`` (a softmax over 16k columns: values near 6e-5 against atol 1e-2)
would pass whatever it contains, a constant included.
:func:`fingerprint` is shared with the candidate runner so both sides hash an
output the same way (T10: an output that changes after it was returned).
Every failure becomes a :class:`~cuda_agent.schemas.CheckError` whose message
says what was expected, what was found, and where.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from cuda_agent.schemas.result import CheckError

#: Elements per chunk when reducing big tensors (keeps temporaries small on the GPU).
_CHUNK = 1 << 24


def reference_rms(expected: Any) -> float:
    """Root mean square of the finite elements of ``expected`` (0.0 when none is finite), chunk by chunk, with one
    device synchronisation at the end."""
    import torch

    flat = expected.detach().reshape(-1)
    if flat.numel() == 0:
        return 0.0
    sums, counts = [], []
    for start in range(0, flat.numel(), _CHUNK):
        e = flat[start : start + _CHUNK]
        finite = torch.isfinite(e)
        sums.append(torch.linalg.vector_norm(torch.where(finite, e, torch.zeros_like(e)), dtype=torch.float64) ** 2)
        counts.append(finite.sum())
    total, count = float(torch.stack(sums).sum().item()), int(torch.stack(counts).sum().item())
    return math.sqrt(total / count) if count else 0.0


def effective_atol(atol: float, rtol: float, rms: float) -> float:
    """The absolute tolerance after the scale-aware rule: ``min(atol, rtol * rms)``.

    ``rms`` is the reference output's own RMS magnitude (:func:`reference_rms`). Outputs whose RMS is at least
    ``atol / rtol`` (1.0 with the paper's 1e-2 / 1e-2) keep the paper's tolerance unchanged; smaller outputs are held
    to the same relative tolerance at their own scale. A reference that is all zeros (or has no finite element) has
    no scale: the paper's ``atol`` applies; so does a zero ``rtol`` (no relative scale to hold it to).
    """
    if not rms > 0.0 or not math.isfinite(rms) or not rtol > 0.0:
        return atol
    return min(atol, rtol * rms)


def fingerprint(t: Any) -> str:
    """A content hash of tensor ``t`` (bytes, shape and dtype), computed where it lives.

    CPU: sha256 of the bytes. CUDA: a position-weighted 64-bit checksum of the
    bytes computed on the device in one read (:mod:`cuda_agent.harness.checksum`;
    no host copy of gigabytes).
    """
    import torch

    from cuda_agent.harness.checksum import device_checksum

    flat = t.detach().contiguous().reshape(-1)
    head = f"{tuple(t.shape)}|{str(t.dtype).removeprefix('torch.')}|"
    if flat.numel() == 0:
        return head + "empty"
    raw = flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8)
    if raw.device.type == "cpu":
        return head + hashlib.sha256(raw.numpy()).hexdigest()[:32]  # buffer protocol: no copy
    return head + f"{device_checksum(raw):016x}"


def dtype_name(t: Any) -> str:
    """'float32' for torch.float32."""
    return str(t.dtype).removeprefix("torch.")


def compare_output(
    expected: Any, actual: Any, *, atol: float, rtol: float, input_set: int | None = None, index: int = 0,
    rms: float | None = None, floor: float = 0.0, noise: float = 0.0,
) -> list[CheckError]:
    """Checks of one output against its expected tensor; empty list = it passes.

    Order: dtype, shape, device, then values (NaN/Inf placement, tolerance).
    NaN never passes, even where the reference has NaN (a candidate can
    always produce NaN; we do not reward it). Floating outputs are held to
    ``effective_atol(atol, rtol, rms(expected)) + rtol * |expected|``; ``rms``
    is :func:`reference_rms` of ``expected`` when the caller already has it. ``floor``: the absolute term is at least
    ``floor * rms`` (widened sets, :data:`~cuda_agent.harness.widening.NOISE_FLOOR`: float32's own rounding at
    magnitudes far beyond the task's, where the paper's fixed atol would fail a kernel that sums in another order).
    ``noise``: the absolute term is at least ``min(noise, atol)`` (an ordinary set's noise floor, measured from the
    reference's own response to a 2**-22 nudge of its inputs: harness/noise_floor.py).
    """

    where = dict(input_set=input_set, output=index)
    if actual.dtype != expected.dtype:
        return [
            CheckError(
                check="dtype",
                message=f"output {index}: expected dtype {dtype_name(expected)}, got {dtype_name(actual)}",
                **where,
            )
        ]
    if tuple(actual.shape) != tuple(expected.shape):
        return [
            CheckError(
                check="shape",
                message=f"output {index}: expected shape {list(expected.shape)}, got {list(actual.shape)}",
                **where,
            )
        ]
    if actual.device.type != expected.device.type:
        return [
            CheckError(
                check="device",
                message=f"output {index}: expected a tensor on {expected.device.type}, got {actual.device.type}",
                **where,
            )
        ]
    if actual.numel() == 0:
        return []
    if not (actual.is_floating_point() or actual.is_complex()):
        diff = actual != expected
        n_bad = int(diff.sum().item())
        if n_bad == 0:
            return []
        first = _first_index(diff)
        return [
            CheckError(
                check="tolerance",
                message=f"output {index}: {n_bad} of {actual.numel()} elements differ (exact match required for "
                f"{dtype_name(actual)}); first at index {first}: expected {expected[first].item()}, "
                f"got {actual[first].item()}",
                details={"mismatched": n_bad, "numel": actual.numel(), "first_index": list(first)},
                **where,
            )
        ]
    errors: list[CheckError] = []
    rms = reference_rms(expected) if rms is None else rms  # the caller may keep it per expected tensor
    paper_atol, atol = atol, effective_atol(atol, rtol, rms)
    floored = floor > 0.0 and math.isfinite(rms) and floor * rms > atol
    if floored:
        atol = floor * rms
    noised = noise > atol and atol < paper_atol
    if noised:
        atol = min(noise, paper_atol)
    stats = _float_stats(expected.reshape(-1), actual.reshape(-1), atol, rtol)
    numel = actual.numel()
    if stats["n_nan"]:
        first = _unravel(stats["first_nan"], actual.shape)
        errors.append(
            CheckError(
                check="nan",
                message=f"output {index}: {stats['n_nan']} of {numel} elements are NaN (first at index {list(first)}); "
                "NaN never passes — look for uninitialised memory or out-of-range reads",
                details={"nan": stats["n_nan"], "numel": numel, "first_index": list(first)},
                **where,
            )
        )
    n_bad = stats["n_bad"]
    if n_bad and n_bad != stats["n_nan"]:
        worst = _unravel(stats["worst"], actual.shape)
        flat_e, flat_a = expected.reshape(-1), actual.reshape(-1)
        e_w, a_w = flat_e[stats["worst"]].item(), flat_a[stats["worst"]].item()
        scaled = (f" (atol scaled to the reference's own RMS magnitude {rms:.3g}: outputs this small are held to "
                  f"rtol at their scale, not to atol={paper_atol:g})") if atol < paper_atol and not noised else ""
        if noised:
            scaled = (f" (noise floor applied: atol scaled to the reference's own RMS magnitude {rms:.3g} would be "
                      f"{effective_atol(paper_atol, rtol, rms):.3g}, below the reference's own float32 noise; raised to "
                      f"4x how far the reference moves when its inputs move by 2**-22 relative, never above "
                      f"atol={paper_atol:g})")
        errors.append(
            CheckError(
                check="tolerance",
                message=(
                    f"output {index}: {n_bad} of {numel} elements ({100.0 * n_bad / numel:.3g}%) outside "
                    f"atol={atol:.3g}, rtol={rtol:g}{scaled}; max abs error {stats['max_abs']:.4g}, max rel error "
                    f"{stats['max_rel']:.4g}; worst at index {list(worst)}: expected {e_w:.6g}, got {a_w:.6g}"
                ),
                details={
                    "mismatched": n_bad,
                    "numel": numel,
                    "max_abs_err": stats["max_abs"],
                    "max_rel_err": stats["max_rel"],
                    "worst_index": list(worst),
                    "atol": atol,
                    "rtol": rtol,
                    "paper_atol": paper_atol,
                    "reference_rms": rms,
                    **({"noise_floor": atol} if noised else {}),
                },
                **where,
            )
        )
    return errors


def _compute_dtype(*tensors: Any) -> Any:
    """float64 where an operand is float64 (or complex), else float32: the tolerance test of float32, float16 and
    bfloat16 outputs is exact enough in float32 and moves half the bytes."""
    import torch

    wide = any(t.dtype in (torch.float64, torch.complex128, torch.complex64) for t in tensors)
    return torch.float64 if wide else torch.float32


def _chunk_verdict(e: Any, a: Any, atol: float, rtol: float) -> tuple[Any, Any, Any]:
    """(NaN mask of the candidate, per-element error, out-of-tolerance mask) of one chunk, in its compute dtype."""
    import torch

    nan = torch.isnan(a)
    finite_e = torch.isfinite(e)
    # Infinities must match exactly; finite values within atol + rtol*|expected|; NaN always fails.
    err = torch.where(finite_e, (a - e).abs(), torch.where(a == e, 0.0, float("inf")))
    err = torch.where(nan, float("inf"), err)
    bad = err > torch.where(finite_e, atol + rtol * e.abs(), torch.zeros_like(e))
    return nan, err, bad


def _float_stats(e_flat: Any, a_flat: Any, atol: float, rtol: float) -> dict[str, Any]:
    """NaN count, out-of-tolerance count and the worst element, chunk by chunk (bounded temporaries). A first pass
    only counts (one device synchronisation in all); the chunks with a mismatch are looked at again for the report."""
    import torch

    from cuda_agent.harness.fused_verdict import fused_counts

    dtype = _compute_dtype(e_flat, a_flat)
    nans, bads = [], []
    starts = list(range(0, a_flat.numel(), _CHUNK))
    for start in starts:
        e, a = e_flat[start : start + _CHUNK].to(dtype), a_flat[start : start + _CHUNK].to(dtype)
        fused = fused_counts(e, a, atol, rtol)  # CUDA: one kernel instead of a dozen (harness/fused_verdict.py)
        if fused is not None:
            nans.append(fused[0])
            bads.append(fused[1])
            continue
        nan, _, bad = _chunk_verdict(e, a, atol, rtol)
        nans.append(nan.sum())
        bads.append(bad.sum())
    nan_counts = torch.stack(nans).tolist()
    bad_counts = torch.stack(bads).tolist()
    n_nan, n_bad = int(sum(nan_counts)), int(sum(bad_counts))
    first_nan = worst = -1
    max_abs = max_rel = 0.0
    worst_err = -1.0
    for start, c_nan, c_bad in zip(starts, nan_counts, bad_counts):
        if not (c_nan or c_bad):
            continue
        e = e_flat[start : start + _CHUNK].to(torch.float64)
        a = a_flat[start : start + _CHUNK].to(torch.float64)
        nan, err, bad = _chunk_verdict(e, a, atol, rtol)
        if c_nan and first_nan < 0:
            first_nan = start + int(torch.nonzero(nan)[0].item())
        if not c_bad:
            continue
        finite_e = torch.isfinite(e)
        finite_err = torch.where(torch.isfinite(err), err, torch.zeros_like(err))
        rel = torch.where(finite_e, finite_err / e.abs().clamp_min(1e-12), torch.zeros_like(err))
        max_rel = max(max_rel, float(rel.max().item()))
        scored = torch.where(bad, finite_err, torch.full_like(err, -1.0))
        j = int(torch.argmax(scored).item())
        val = float(scored[j].item())
        max_abs = max(max_abs, float(finite_err.max().item()))
        if val > worst_err:
            worst_err, worst = val, start + j
    return {"n_nan": n_nan, "first_nan": first_nan, "n_bad": n_bad, "max_abs": max_abs, "max_rel": max_rel, "worst": worst}


def _unravel(flat: int, shape: Any) -> tuple[int, ...]:
    """Multi-index of flat position ``flat`` in ``shape``."""
    idx: list[int] = []
    for size in reversed(list(shape)):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))


def _first_index(mask: Any) -> tuple[int, ...]:
    """Multi-index of the first True element of ``mask``."""
    import torch

    flat = int(torch.nonzero(mask.reshape(-1))[0].item())
    idx: list[int] = []
    for size in reversed(mask.shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))


def check_count(expected: int, got: int, input_set: int | None = None) -> list[CheckError]:
    """The candidate returned as many outputs as the reference."""
    if expected == got:
        return []
    return [
        CheckError(
            check="count",
            message=f"forward returned {got} output(s), the reference returns {expected}",
            input_set=input_set,
        )
    ]
