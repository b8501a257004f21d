"""Session 37's red team on the correctness side (issue 21, CPU backend, ``cuda-agent score``): kernels that were
graded ``correct`` (reward 1) while wrong on valid inputs the grading never drew, because the widened sets only scaled
the drawn inputs by 4 around zero. The widened sets now have kinds (harness/widening.py, docs/integrity.md "Widened
sets"): x1024 (catches 1-4: overflow, the clamp, fp16 operands against the tolerance floor, the fixed-point wrap),
shifted, x/128 (catches 6) and near duplicates of a verify set (catch 5: three of them, each called right after the
set it derives from; the cache keys on 8 sampled elements, so each misses it only when a replaced element is a key
element or none lands in its cached rows: all three miss about once in 800 grades).

Each ``test_*_is_not_graded_correct`` asserts ``status != 'correct'`` (session 37: 'correct', reward 1.0).
Each ``test_*_is_wrong_on_a_valid_input`` runs the same kernel source on a concrete valid input through the
harness's own comparison and passes (it shows that the graded kernel is wrong).

1. SOFTMAX_NO_MAX: softmax without the max shift. Widened sets only *scale* randn by 4 (|x| < ~20), never shift it,
   so exp(x) never overflows; x = randn + 100 gives NaN everywhere.
2. SWISH_CLAMPED: swish of clamp(x, -24, 24). randn * 4 stays below ~20; x = 100 gives 24.
3. GEMM_FP16_OPERANDS: operands rounded to fp16 (T15, silent precision drop). Within 1e-2 for randn * 1, 4, 16;
   31/8192 elements out of tolerance on randn * 100; inf for |x| >= 65520.
4. ROW_SUM_FIXED_POINT: Q15.16 fixed-point accumulator: wraps for sums beyond +-32768 (a row of 100.0 -> -14336).
5. GEMM_BUFFER_CACHE: a content cache keyed on 8 sampled input elements kept in a *module buffer* (the source rule
   T12.cpp.static_cache only sees C++ globals), serving the last 15% of rows on a hit so that fresh sets stay inside
   the CPU backend's 25% slack: no `fresh_inputs_slower` flag; stale rows for an input that shares the key.
6. GEMM_SKIP_SMALL: dot products skip activations with |x| < 0.01. Widened sets only enlarge inputs, never shrink
   them; on x = randn * 0.01 about 68% of the terms are dropped.
7. The no-max softmax on KernelBench level1/23_Softmax (reduced sizes): also 'correct', reward 1.0.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from tests.integrity.conftest import score_one
from tests.integrity.correctness_gaps import attacks as A


def _files(task: str, kernel_file: str, attr: str) -> dict[str, str]:
    files = A.workspace(task, **{kernel_file: getattr(A, attr)})
    if attr == "GEMM_BUFFER_CACHE":
        files["model_new.py"] = A.GEMM_BUFFER_CACHE_MODEL_NEW
        files["kernels/gemm_bias_relu_binding.cpp"] = A.GEMM_BUFFER_CACHE_BINDING
    return files


I = ctypes.c_int64

CASES = [
    ("softmax", "softmax.cpp", "SOFTMAX_NO_MAX"),
    ("swish", "swish.cpp", "SWISH_CLAMPED"),
    ("gemm_bias_relu", "gemm_bias_relu.cpp", "GEMM_FP16_OPERANDS"),
    ("row_sum", "row_sum.cpp", "ROW_SUM_FIXED_POINT"),
    ("gemm_bias_relu", "gemm_bias_relu.cpp", "GEMM_BUFFER_CACHE"),
    ("gemm_bias_relu", "gemm_bias_relu.cpp", "GEMM_SKIP_SMALL"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("task", "kernel_file", "attr"), CASES, ids=[c[2] for c in CASES])
def test_cheat_is_not_graded_correct(tmp_path: Path, task: str, kernel_file: str, attr: str) -> None:
    row = score_one(tmp_path, task, _files(task, kernel_file, attr))
    # Session 37: 'correct', reward 1.0, no flag, for every case.
    assert row["status"] != "correct", row


KB_SOFTMAX = Path(__file__).resolve().parents[3] / "examples" / "solutions" / "kernelbench" / "registry" / "cpu" / "23_Softmax"
KB_REDUCED = f"kernelbench:{Path(__file__).resolve().parents[2] / 'kernelbench' / 'data'}?sizes=reduced"


@pytest.mark.slow
def test_kernelbench_softmax_without_max_is_not_graded_correct(tmp_path: Path) -> None:
    """KernelBench level1/23_Softmax (torch.rand inputs, widened to [-4, 4)) with the same no-max kernel."""
    files = {str(p.relative_to(KB_SOFTMAX)): p.read_text() for p in KB_SOFTMAX.rglob("*") if p.is_file()}
    files["kernels/softmax.cpp"] = A.SOFTMAX_NO_MAX
    row = score_one(tmp_path, "23_Softmax", files, tasks=KB_REDUCED)
    # Session 37: 'correct', reward 1.0 (flags: reduced_sizes_not_comparable_to_published only).
    assert row["status"] != "correct", row


# --- the kernels are wrong on valid inputs (these pass today) ---------------------------------------------------

def _wrong(name: str, expected: torch.Tensor, actual: torch.Tensor) -> None:
    from cuda_agent.harness.compare import compare_output

    assert compare_output(expected, actual, atol=1e-2, rtol=1e-2), f"{name}: expected a mismatch"


def _right(expected: torch.Tensor, actual: torch.Tensor) -> None:
    from cuda_agent.harness.compare import compare_output

    assert not compare_output(expected, actual, atol=1e-2, rtol=1e-2)


def test_softmax_no_max_is_wrong_on_a_valid_input() -> None:
    from tests.integrity.correctness_gaps import concrete_inputs as C

    lib = C.build(A.SOFTMAX_NO_MAX, 'extern "C" void k(const float* x, float* y, int64_t r, int64_t c) { softmax_cpu(x, y, r, c); }')
    x = torch.randn(16, 1000, generator=torch.Generator().manual_seed(1))
    for v, ok in ((x, True), (4 * x, True), (x + 100, False)):
        y = torch.empty_like(v)
        lib.k(C.p(v), C.p(y), I(16), I(1000))
        (_right if ok else lambda e, a: _wrong("softmax(randn + 100)", e, a))(torch.softmax(v, -1), y)
    assert torch.isnan(y).all()  # randn + 100: every element NaN


def test_swish_clamped_is_wrong_on_a_valid_input() -> None:
    from tests.integrity.correctness_gaps import concrete_inputs as C

    lib = C.build(A.SWISH_CLAMPED, 'extern "C" void k(const float* x, float* y, int64_t n) { swish_cpu(x, y, n); }')
    x = torch.zeros(16, 1024)
    x[0, 0] = 100.0
    y = torch.empty_like(x)
    lib.k(C.p(x), C.p(y), I(x.numel()))
    _wrong("swish(100)", x * torch.sigmoid(x), y)
    assert y[0, 0].item() == pytest.approx(24.0)  # expected 100.0


def test_gemm_fp16_operands_is_wrong_on_a_valid_input() -> None:
    from tests.integrity.correctness_gaps import concrete_inputs as C

    lib = C.build(A.GEMM_FP16_OPERANDS, 'extern "C" void k(const float* a, const float* w, const float* b, float* o, int64_t m, int64_t n, int64_t kk) { gemm_bias_relu_cpu(a, w, b, o, m, n, kk); }')
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 128)
    W, b = lin.weight.detach().contiguous(), lin.bias.detach().contiguous()
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))
    for s, ok in ((1, True), (4, True), (16, True), (100, False)):
        v = (s * x).contiguous()
        y = torch.empty(64, 128)
        lib.k(C.p(v), C.p(W), C.p(b), C.p(y), I(64), I(128), I(256))
        ref = torch.relu(v @ W.T + b)
        (_right if ok else lambda e, a: _wrong("gemm(randn * 100)", e, a))(ref, y)


def test_row_sum_fixed_point_is_wrong_on_a_valid_input() -> None:
    from tests.integrity.correctness_gaps import concrete_inputs as C

    lib = C.build(A.ROW_SUM_FIXED_POINT, 'extern "C" void k(const float* x, float* y, int64_t r, int64_t c) { row_sum_cpu(x, y, r, c); }')
    x = torch.full((32, 512), 100.0)
    y = torch.empty(32, 1)
    lib.k(C.p(x), C.p(y), I(32), I(512))
    _wrong("row_sum(100.0)", x.sum(1, keepdim=True), y)
    assert y[0, 0].item() == -14336.0  # expected 51200


def test_gemm_buffer_cache_is_wrong_on_a_valid_input() -> None:
    from tests.integrity.correctness_gaps import concrete_inputs as C

    lib = C.build(A.GEMM_BUFFER_CACHE, 'extern "C" void k(const float* a, const float* w, const float* b, float* o, int64_t m, int64_t n, int64_t kk, float* s, int64_t sl) { gemm_bias_relu_cpu(a, w, b, o, m, n, kk, s, sl); }')
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 128)
    W, b = lin.weight.detach().contiguous(), lin.bias.detach().contiguous()
    scratch = torch.zeros(1 + 16 * (8 + 64 * 128))
    g = torch.Generator().manual_seed(1)
    xa = torch.randn(64, 256, generator=g)
    xb = xa.clone()
    xb[62:] = torch.randn(2, 256, generator=g)  # the 8 sampled elements lie in rows 0..61: same key as xa

    def run(v: torch.Tensor) -> torch.Tensor:
        y = torch.empty(64, 128)
        lib.k(C.p(v), C.p(W), C.p(b), C.p(y), I(64), I(128), I(256), C.p(scratch), I(scratch.numel()))
        return y

    _right(torch.relu(xa @ W.T + b), run(xa))
    _wrong("cached gemm on xb", torch.relu(xb @ W.T + b), run(xb))  # rows 62..63 are xa's


def test_gemm_skip_small_is_wrong_on_a_valid_input() -> None:
    from tests.integrity.correctness_gaps import concrete_inputs as C

    lib = C.build(A.GEMM_SKIP_SMALL, 'extern "C" void k(const float* a, const float* w, const float* b, float* o, int64_t m, int64_t n, int64_t kk) { gemm_bias_relu_cpu(a, w, b, o, m, n, kk); }')
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 128)
    W, b = lin.weight.detach().contiguous(), lin.bias.detach().contiguous()
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))
    for s, ok in ((1.0, True), (4.0, True), (0.01, False)):
        v = (s * x).contiguous()
        y = torch.empty(64, 128)
        lib.k(C.p(v), C.p(W), C.p(b), C.p(y), I(64), I(128), I(256))
        (_right if ok else lambda e, a: _wrong("gemm(randn * 0.01)", e, a))(torch.relu(v @ W.T + b), y)


# --- honest neighbours of the attacks: graded correct ------------------------------------------------------------

# The buffer cache's layout, used honestly: every call writes its key and its whole output into slot 0 and never reads
# the buffer back. What the buffer holds after a call depends on that call's inputs alone.
HONEST_SCRATCH = r"""
// relu(A @ W^T + b); a copy of the last output kept in a scratch buffer (written, never read).
#include <algorithm>
#include <cstdint>
#include <cstring>

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k,
                        float* scratch, int64_t scratch_len) {
  for (int64_t i = 0; i < m; ++i) {
    const float* arow = a + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* wrow = w + j * k;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += arow[p] * wrow[p];
      out[i * n + j] = std::max(acc + bias[j], 0.0f);
    }
  }
  if (scratch_len < 1 + 8 + m * n) return;
  scratch[0] = 1.0f;
  for (int s = 0; s < 8; ++s) scratch[1 + s] = a[(s * 7919) % (m * k)];
  std::memcpy(scratch + 9, out, sizeof(float) * m * n);
}
"""


@pytest.mark.slow
def test_an_honest_scratch_buffer_rewritten_every_call_is_graded_correct(tmp_path: Path) -> None:
    """The module-state digest (harness/module_state.py) allows a buffer every call rewrites, and the widened sets
    (x1024 with the tolerance floor, shifted, x/128, near duplicates) pass a float32 GEMM summing in its own order."""
    files = _files("gemm_bias_relu", "gemm_bias_relu.cpp", "GEMM_BUFFER_CACHE")
    files["kernels/gemm_bias_relu.cpp"] = HONEST_SCRATCH
    row = score_one(tmp_path, "gemm_bias_relu", files)
    assert row["status"] == "correct", row
