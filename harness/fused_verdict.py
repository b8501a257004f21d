"""One fused CUDA kernel for the counting pass of the tolerance check (:func:`~cuda_agent.harness.compare.compare_output`).

The counting pass decides whether an output passes: per element, NaN in the candidate, and
``|actual - expected| > atol + rtol * |expected|`` (infinities must match exactly). In torch's eager ops that is
about a dozen kernels per chunk, each writing a full temporary: on the H200 81 ms for a 6 GiB float32 output
(``benchmarks/check_path_probe.py``, session 18), at 4.3 TB/s about sixty passes over the tensor, and it runs for
every output of every input set of every verify, profile and grade. Here one elementwise kernel (torch's
jiterator: compiled by NVRTC at first use, cached in memory and on disk) writes a verdict code per element
(0 pass, 1 out of tolerance, 2 NaN) that two counts read.

It decides only the counts, exactly as :func:`~cuda_agent.harness.compare._chunk_verdict` does: the same
operations in the same compute dtype, with the tolerance's multiply and add rounded separately (``__fmul_rn`` /
``__fadd_rn``, no fused multiply-add, as torch's two kernels do), so an element on the boundary gets the same
verdict. A chunk with any failure is looked at again by the torch path for the report. At first use in a process
the kernel is checked against the torch path on crafted elements (NaN, infinities of both signs, elements on the
tolerance boundary, random elements near it) in float32 and float64; any disagreement, or a kernel that does not
compile, turns the fused path off for the process (a warning is logged) and the torch path decides, as before.
"""

from __future__ import annotations

import threading
from typing import Any

import structlog

log = structlog.get_logger(__name__)

#: The per-element verdict: 2 = NaN in the candidate, 1 = outside the tolerance, 0 = passes. ``e - e == 0`` is
#: "e is finite" (inf - inf and NaN - NaN are NaN), which needs no math header in NVRTC.
VERDICT_CODE = """
template <typename T> T cuda_agent_verdict(T e, T a, T atol, T rtol) {
  struct RN {
    static __device__ float mul(float x, float y) { return __fmul_rn(x, y); }
    static __device__ double mul(double x, double y) { return __dmul_rn(x, y); }
    static __device__ float add(float x, float y) { return __fadd_rn(x, y); }
    static __device__ double add(double x, double y) { return __dadd_rn(x, y); }
  };
  if (a != a) return T(2);
  T d = a - e;
  if (d < T(0)) d = -d;
  if (e - e == T(0)) {
    T ae = e < T(0) ? -e : e;
    return d <= RN::add(atol, RN::mul(rtol, ae)) ? T(0) : T(1);
  }
  return a == e ? T(0) : T(1);
}
"""

_lock = threading.Lock()
_state: dict[str, Any] = {"fn": None, "tried": False}


def fused_counts(e: Any, a: Any, atol: float, rtol: float) -> tuple[Any, Any] | None:
    """(NaN count, out-of-tolerance count) of one chunk as 0-dim device tensors (NaN elements count as out of
    tolerance too, as in the torch path), or None where the fused kernel is not in use (CPU tensors, a dtype
    other than float32/float64, no NVRTC, or its check at first use failed)."""
    import torch

    if not (e.is_cuda and a.is_cuda and e.dtype == a.dtype and e.dtype in (torch.float32, torch.float64)):
        return None
    fn = _kernel()
    if fn is None:
        return None
    code = fn(e, a, atol=atol, rtol=rtol)
    return (code == 2).sum(), (code != 0).sum()


def _kernel() -> Any:
    """The jitted verdict, made and checked once per process; None when unusable."""
    if _state["tried"]:
        return _state["fn"]
    with _lock:
        if not _state["tried"]:
            _state["fn"] = _make_and_check()
            _state["tried"] = True
    return _state["fn"]


def _make_and_check() -> Any:
    import torch

    try:
        from torch.cuda.jiterator import _create_jit_fn

        fn = _create_jit_fn(VERDICT_CODE, atol=0.0, rtol=0.0)
        for dtype in (torch.float32, torch.float64):
            problem = disagreement(fn, dtype)
            if problem:
                log.warning("fused tolerance check disagrees with the torch path: it stays off", problem=problem)
                return None
        return fn
    except Exception as exc:  # noqa: BLE001 - no NVRTC, an old torch: the torch path decides, as before
        log.warning("fused tolerance check unavailable: the torch path decides", error=f"{type(exc).__name__}: {exc}")
        return None


def crafted_pairs(dtype: Any, device: str = "cuda") -> tuple[Any, Any, float, float]:
    """(expected, actual, atol, rtol) covering every branch of the verdict: equal values, NaN on either side,
    infinities equal, of opposite signs and against finite values, elements exactly on the tolerance boundary and
    one ulp either side of it, and random elements within a few ulps of the boundary."""
    import torch

    atol, rtol = 1e-2, 1e-2
    inf, nan = float("inf"), float("nan")
    g = torch.Generator().manual_seed(0)
    e_fix = [1.0, 1.0, inf, inf, -inf, nan, nan, 0.0, -3.5, 2.0, inf, 1e30, 0.0]
    a_fix = [1.0, nan, inf, -inf, -inf, nan, 1.0, 0.0, -3.5, 2.0, 1e30, inf, -0.0]
    e = torch.tensor(e_fix, dtype=dtype)
    a = torch.tensor(a_fix, dtype=dtype)
    # On the boundary: a = e + tol exactly where representable, and its neighbours one ulp away.
    base = (torch.rand(4096, generator=g, dtype=torch.float64) * 8 - 4).to(dtype)
    tol = atol + rtol * base.abs()  # torch's own rounding of the tolerance, in dtype
    edge = base + tol
    up = torch.nextafter(edge, torch.full_like(edge, inf))
    down = torch.nextafter(edge, torch.full_like(edge, -inf))
    noise = (torch.randn(4096, generator=g, dtype=torch.float64).to(dtype)) * tol * 1e-6
    e = torch.cat([e, base, base, base, base, -base])
    a = torch.cat([a, edge, up, down, edge + noise, -(edge + noise)])
    return e.to(device), a.to(device), atol, rtol


def disagreement(fn: Any, dtype: Any, device: str = "cuda") -> str | None:
    """Where the jitted verdict and the torch path's disagree on :func:`crafted_pairs`, or None."""
    import torch

    from cuda_agent.harness.compare import _chunk_verdict

    e, a, atol, rtol = crafted_pairs(dtype, device)
    code = fn(e, a, atol=atol, rtol=rtol)
    nan, _, bad = _chunk_verdict(e, a, atol, rtol)
    mine_bad, mine_nan = code != 0, code == 2
    if not torch.equal(mine_nan, nan) or not torch.equal(mine_bad, bad):
        where = torch.nonzero((mine_bad != bad) | (mine_nan != nan)).reshape(-1)[:5].tolist()
        return (f"{str(dtype).removeprefix('torch.')}: {len(where)}+ element(s) differ, e.g. at {where}: expected "
                f"{[e[i].item() for i in where]}, actual {[a[i].item() for i in where]}")
    if not bool(bad.any()) or bool(bad.all()):
        return "the crafted elements do not exercise both verdicts"
    return None
