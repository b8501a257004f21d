"""Runs each attack's kernel (compiled here with g++, called through ctypes) on concrete valid inputs and on the
task's own distribution, judged by the harness's own comparison (``harness/compare.py``, atol = rtol = 1e-2).

    python -m tests.integrity.correctness_gaps.concrete_inputs
"""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

import torch

from cuda_agent.harness.compare import compare_output
from tests.integrity.correctness_gaps import attacks as A

F = ctypes.POINTER(ctypes.c_float)


def build(src: str, wrapper: str) -> ctypes.CDLL:
    d = Path(tempfile.mkdtemp())
    (d / "k.cpp").write_text(src + "\n" + wrapper)
    subprocess.run(["g++", "-O2", "-fPIC", "-shared", "-std=c++17", str(d / "k.cpp"), "-o", str(d / "k.so")], check=True)
    return ctypes.CDLL(str(d / "k.so"))


def p(t: torch.Tensor):
    return ctypes.cast(t.data_ptr(), F)


def verdict(name: str, expected: torch.Tensor, actual: torch.Tensor) -> bool:
    errs = compare_output(expected, actual, atol=1e-2, rtol=1e-2)
    print(f"  {name}: {'PASS' if not errs else 'FAIL: ' + errs[0].message}")
    return not errs


def softmax() -> None:
    lib = build(A.SOFTMAX_NO_MAX, 'extern "C" void k(const float* x, float* y, int64_t r, int64_t c) { softmax_cpu(x, y, r, c); }')
    def run(x):
        y = torch.empty_like(x)
        lib.k(p(x), p(y), ctypes.c_int64(x.shape[0]), ctypes.c_int64(x.shape[1]))
        return y
    print("SOFTMAX_NO_MAX (softmax, [16, 1000])")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 1000, generator=g)
    verdict("randn", torch.softmax(x, -1), run(x))
    verdict("randn * 4 (widened)", torch.softmax(4 * x, -1), run(4 * x))
    verdict("randn + 100", torch.softmax(x + 100, -1), run(x + 100))
    verdict("randn * 30", torch.softmax(30 * x, -1), run(30 * x))
    verdict("randn - 120", torch.softmax(x - 120, -1), run(x - 120))


def swish() -> None:
    lib = build(A.SWISH_CLAMPED, 'extern "C" void k(const float* x, float* y, int64_t n) { swish_cpu(x, y, n); }')
    def run(x):
        y = torch.empty_like(x)
        lib.k(p(x), p(y), ctypes.c_int64(x.numel()))
        return y
    print("SWISH_CLAMPED (swish, [16, 1024])")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 1024, generator=g)
    ref = lambda v: v * torch.sigmoid(v)  # noqa: E731
    verdict("randn", ref(x), run(x))
    verdict("randn * 4 (widened)", ref(4 * x), run(4 * x))
    verdict("randn * 10", ref(10 * x), run(10 * x))
    x1 = torch.zeros(16, 1024); x1[0, 0] = 100.0
    verdict("zeros with x[0,0] = 100", ref(x1), run(x1))


def gemm() -> None:
    lib = build(A.GEMM_FP16_OPERANDS, 'extern "C" void k(const float* a, const float* w, const float* b, float* o, int64_t m, int64_t n, int64_t kk) { gemm_bias_relu_cpu(a, w, b, o, m, n, kk); }')
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 128)
    W, b = lin.weight.detach().contiguous(), lin.bias.detach().contiguous()
    def run(x):
        y = torch.empty(x.shape[0], 128)
        lib.k(p(x), p(W), p(b), p(y), ctypes.c_int64(x.shape[0]), ctypes.c_int64(128), ctypes.c_int64(256))
        return y
    ref = lambda v: torch.relu(v @ W.T + b)  # noqa: E731
    print("GEMM_FP16_OPERANDS (gemm_bias_relu, x [64, 256], nn.Linear(256, 128) from seed 0)")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 256, generator=g)
    for s in (1, 4, 16, 100):
        verdict(f"randn * {s}", ref(s * x), run((s * x).contiguous()))
    x2 = x.clone(); x2[0, 0] = 70000.0
    verdict("randn with x[0,0] = 70000", ref(x2), run(x2))


def row_sum() -> None:
    lib = build(A.ROW_SUM_FIXED_POINT, 'extern "C" void k(const float* x, float* y, int64_t r, int64_t c) { row_sum_cpu(x, y, r, c); }')
    def run(x):
        y = torch.empty(x.shape[0], 1)
        lib.k(p(x), p(y), ctypes.c_int64(x.shape[0]), ctypes.c_int64(x.shape[1]))
        return y
    ref = lambda v: v.sum(1, keepdim=True)  # noqa: E731
    print("ROW_SUM_FIXED_POINT (row_sum, [32, 512])")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 512, generator=g)
    verdict("randn", ref(x), run(x))
    verdict("randn * 4 (widened)", ref(4 * x), run(4 * x))
    verdict("randn + 100", ref(x + 100), run(x + 100))
    verdict("full of 100.0", ref(torch.full((32, 512), 100.0)), run(torch.full((32, 512), 100.0)))


def gemm_cache() -> None:
    lib = build(A.GEMM_BUFFER_CACHE, 'extern "C" void k(const float* a, const float* w, const float* b, float* o, int64_t m, int64_t n, int64_t kk, float* s, int64_t sl) { gemm_bias_relu_cpu(a, w, b, o, m, n, kk, s, sl); }')
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 128)
    W, b = lin.weight.detach().contiguous(), lin.bias.detach().contiguous()
    scratch = torch.zeros(1 + 16 * (8 + 64 * 128))
    def run(x):
        y = torch.empty(x.shape[0], 128)
        lib.k(p(x), p(W), p(b), p(y), ctypes.c_int64(64), ctypes.c_int64(128), ctypes.c_int64(256), p(scratch),
              ctypes.c_int64(scratch.numel()))
        return y
    ref = lambda v: torch.relu(v @ W.T + b)  # noqa: E731
    print("GEMM_BUFFER_CACHE (gemm_bias_relu; the module's scratch buffer persists between calls)")
    g = torch.Generator().manual_seed(1)
    xa = torch.randn(64, 256, generator=g)
    xb = xa.clone(); xb[62:] = torch.randn(2, 256, generator=g)  # the 8 sampled elements lie in rows 0..61: same key
    xc = torch.randn(64, 256, generator=g)
    verdict("set A (first call)", ref(xa), run(xa))
    verdict("set C (unrelated)", ref(xc), run(xc))
    verdict("set A again", ref(xa), run(xa))
    verdict("set B = A with rows 62..63 redrawn", ref(xb), run(xb))


def gemm_skip() -> None:
    lib = build(A.GEMM_SKIP_SMALL, 'extern "C" void k(const float* a, const float* w, const float* b, float* o, int64_t m, int64_t n, int64_t kk) { gemm_bias_relu_cpu(a, w, b, o, m, n, kk); }')
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 128)
    W, b = lin.weight.detach().contiguous(), lin.bias.detach().contiguous()
    def run(x):
        y = torch.empty(x.shape[0], 128)
        lib.k(p(x), p(W), p(b), p(y), ctypes.c_int64(x.shape[0]), ctypes.c_int64(128), ctypes.c_int64(256))
        return y
    ref = lambda v: torch.relu(v @ W.T + b)  # noqa: E731
    print("GEMM_SKIP_SMALL (gemm_bias_relu)")
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))
    for s in (1.0, 4.0, 0.01):
        v = (s * x).contiguous()
        verdict(f"randn * {s}", ref(v), run(v))


if __name__ == "__main__":
    softmax(); swish(); gemm(); row_sum(); gemm_cache(); gemm_skip()
