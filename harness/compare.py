"""Output checks of the trusted side: type, dtype, shape, device, NaN, tolerance.

Runs in the trusted reference process, on the device where the outputs live
(the GPU on CUDA), against expected outputs the candidate never sees.
:func:`fingerprint` is shared with the candidate runner so both sides hash an
output the same way (T10: an output that changes after it was returned).
Every failure becomes a :class:`~cuda_agent.schemas.CheckError` whose message
says what was expected, what was found, and where.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cuda_agent.schemas.result import CheckError

#: Elements per chunk when reducing big tensors (keeps temporaries small on the GPU).
_CHUNK = 1 << 24


def fingerprint(t: Any) -> str:
    """A content hash of tensor ``t`` (bytes, shape and dtype), computed where it lives.

    CPU: sha256 of the bytes. CUDA: a position-weighted 64-bit checksum of the
    bytes computed on the device in chunks (no host copy of gigabytes).
    """
    import torch

    flat = t.detach().contiguous().reshape(-1)
    head = f"{tuple(t.shape)}|{str(t.dtype).removeprefix('torch.')}|"
    if flat.numel() == 0:
        return head + "empty"
    raw = flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8)
    if raw.device.type == "cpu":
        return head + hashlib.sha256(raw.numpy().tobytes()).hexdigest()[:32]
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    total = torch.zeros((), dtype=torch.int64, device=raw.device)
    for start in range(0, words.numel(), _CHUNK):
        chunk = words[start : start + _CHUNK].to(torch.int64)
        weights = torch.arange(start, start + chunk.numel(), device=raw.device, dtype=torch.int64) % 65521 + 1
        total += (chunk * weights).sum()
    return head + f"{int(total.item()) & 0xFFFFFFFFFFFFFFFF:016x}"


def dtype_name(t: Any) -> str:
    """'float32' for torch.float32."""
    return str(t.dtype).removeprefix("torch.")


def compare_output(
    expected: Any, actual: Any, *, atol: float, rtol: float, input_set: int | None = None, index: int = 0
) -> list[CheckError]:
    """Checks of one output against its expected tensor; empty list = it passes.

    Order: dtype, shape, device, then values (NaN/Inf placement, tolerance).
    NaN never passes, even where the reference has NaN (a candidate can
    always produce NaN; we do not reward it).
    """
    import torch

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
    a = actual.to(torch.float64) if actual.dtype != torch.float64 else actual
    e = expected.to(torch.float64) if expected.dtype != torch.float64 else expected
    nan_mask = torch.isnan(a)
    n_nan = int(nan_mask.sum().item())
    if n_nan:
        first = _first_index(nan_mask)
        errors.append(
            CheckError(
                check="nan",
                message=f"output {index}: {n_nan} of {a.numel()} elements are NaN (first at index {first}); "
                "NaN never passes — look for uninitialised memory or out-of-range reads",
                details={"nan": n_nan, "numel": a.numel(), "first_index": list(first)},
                **where,
            )
        )
    finite_e = torch.isfinite(e)
    # Infinities must match exactly; finite values within atol + rtol*|expected|.
    abs_err = torch.where(finite_e, (a - e).abs(), torch.where(a == e, 0.0, float("inf")))
    abs_err = torch.where(nan_mask, float("inf"), abs_err)
    limit = atol + rtol * e.abs()
    bad = abs_err > torch.where(finite_e, limit, 0.0)
    n_bad = int(bad.sum().item())
    if n_bad and not (n_nan and n_bad == n_nan):
        finite_err = torch.where(torch.isfinite(abs_err), abs_err, torch.zeros_like(abs_err))
        max_abs = float(finite_err.max().item())
        rel = finite_err / e.abs().clamp_min(1e-12)
        max_rel = float(torch.where(finite_e, rel, torch.zeros_like(rel)).max().item())
        worst = _first_index(finite_err == finite_err.max()) if max_abs > 0 else _first_index(bad)
        errors.append(
            CheckError(
                check="tolerance",
                message=(
                    f"output {index}: {n_bad} of {a.numel()} elements ({100.0 * n_bad / a.numel():.3g}%) outside "
                    f"atol={atol:g}, rtol={rtol:g}; max abs error {max_abs:.4g}, max rel error {max_rel:.4g}; "
                    f"worst at index {list(worst)}: expected {e[worst].item():.6g}, got {a[worst].item():.6g}"
                ),
                details={
                    "mismatched": n_bad,
                    "numel": a.numel(),
                    "max_abs_err": max_abs,
                    "max_rel_err": max_rel,
                    "worst_index": list(worst),
                    "atol": atol,
                    "rtol": rtol,
                },
                **where,
            )
        )
    return errors


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
