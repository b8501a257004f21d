"""Found by session 36's red team, fixed since: a candidate that rewrote libc's ``clock_gettime`` in its own process
earned speed milestones, and one whose product was MKL's ``sgemm`` was graded correct. End to end on the CPU
backend (``cuda-agent score``); the layers are tested one by one in ``test_code_patch_rules.py`` (source, binary) and
``test_native_timer_guard.py`` (the runtime guard over native timing code).

On the CPU backend a call's time is the runner's host clock (``DeviceTimer.time_call``: ``time.perf_counter``
around ``fn()``, method 'host_sync'), read inside the candidate's process. The guards there compare the *Python*
identities of the timing functions (T8.runtime.timer_patched), which a native patch leaves untouched; the outside
backstop, ``T8.outside.wall_clock`` (harness/output_checks.py), only refuses a call reported *longer* than the parent
saw it take; and the speed-of-light floor (T22) is None on the CPU (no device peaks). Nothing in the source or
binary rules refuses ``mprotect`` or writes to code.

The fixture is an honest but deliberately slow swish (eight passes over the data, so its true time is far slower
than eager) whose binding, on its first call, overwrites the first bytes of libc's ``clock_gettime`` with a jump to
its own function: a clock that runs at 1% of real time (TSC-based, calibrated against the real clock first). Every
``perf_counter`` the runner reads afterwards comes from it, so every timed call is reported 100x shorter. The same
kernel without the patch is graded correct at reward 1 (the control below); with it, reward 3.

Second finding: the CPU BLAS rule (T1 vendor_library, "cblas" family) matches ``cblas_*``, ``mkl_*``, ``dnnl_*`` and
``[sdcz]gemm_`` (binary.py ``_VENDOR_SYMBOLS``; the source rule has no gemm name at all), but libtorch_cpu.so, which
every extension links, exports MKL's other spellings too: ``sgemm``, ``SGEMM``, ``sgemm_64``, ``SGEMM_64`` ... A
gemm_bias_relu whose product is MKL's ``sgemm`` (declared by hand, no header) passes the source rules, the binary
rules (the undefined symbol ``sgemm`` matches no pattern) and the runtime op audit (MKL is not an ATen op), and is
graded correct.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrity.conftest import score_one

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "examples" / "tasks"

MODEL_NEW = '''"""Swish, computed honestly (slowly) by the extension."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.swish_forward(x, out)
        return out
'''

# Honest swish, eight times over (a compiler barrier between passes keeps every pass): slower than eager.
KERNEL = r"""
#include <cmath>
#include <cstdint>

void slow_swish_cpu(const float* x, float* y, int64_t n) {
  for (int pass = 0; pass < 8; ++pass) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      y[i] = v / (1.0f + std::exp(-v));
    }
    __asm__ __volatile__("" ::: "memory");
  }
}
"""

SLOW_CLOCK = r"""
#include <time.h>
#include <x86intrin.h>

extern "C" int mprotect(void* addr, size_t len, int prot);

namespace slowclock {

struct Clock {
  static double& scale() { static double v = 0.0; return v; }
  static double& ns_per_tick() { static double v = 0.0; return v; }
  static unsigned long long& tsc0() { static unsigned long long v = 0; return v; }
  static long long& base(int id) {
    static long long b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0, b5 = 0, b6 = 0, b7 = 0;
    switch (id) { case 0: return b0; case 1: return b1; case 2: return b2; case 3: return b3;
                  case 4: return b4; case 5: return b5; case 6: return b6; default: return b7; }
  }
};

// Every clock id: its value when the patch went in, plus the TSC's elapsed time times `scale`.
extern "C" int fake_clock_gettime(clockid_t id, struct timespec* ts) {
  const double dt = (double)(__rdtsc() - Clock::tsc0()) * Clock::ns_per_tick() * Clock::scale();
  const long long t = Clock::base((int)id & 7) + (long long)dt;
  ts->tv_sec = t / 1000000000LL;
  ts->tv_nsec = t % 1000000000LL;
  return 0;
}

void install(double scale) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  const unsigned long long t0 = __rdtsc();
  do { clock_gettime(CLOCK_MONOTONIC, &b); }
  while ((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) < 20000000LL);
  const unsigned long long t1 = __rdtsc();
  Clock::ns_per_tick() = (double)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec)) / (double)(t1 - t0);
  for (int id = 0; id < 8; ++id) {
    struct timespec s;
    if (clock_gettime((clockid_t)id, &s) == 0) Clock::base(id) = s.tv_sec * 1000000000LL + s.tv_nsec;
  }
  Clock::tsc0() = __rdtsc();
  Clock::scale() = scale;
  // libc's clock_gettime (what time.perf_counter calls) now jumps to fake_clock_gettime.
  unsigned char* target = reinterpret_cast<unsigned char*>(&clock_gettime);
  const unsigned long long page = reinterpret_cast<unsigned long long>(target) & ~4095ULL;
  mprotect(reinterpret_cast<void*>(page), 8192, 7);
  const unsigned long long dest = reinterpret_cast<unsigned long long>(&fake_clock_gettime);
  target[0] = 0x48; target[1] = 0xB8;
  for (int i = 0; i < 8; ++i) target[2 + i] = (unsigned char)(dest >> (8 * i));
  target[10] = 0xFF; target[11] = 0xE0;
  mprotect(reinterpret_cast<void*>(page), 8192, 5);
}

}  // namespace slowclock
"""


def binding(patch: bool) -> str:
    install = "  static bool installed = false;\n  if (!installed) { installed = true; slowclock::install(0.01); }\n"
    return (
        '#include "../binding_registry.h"\n'
        + (SLOW_CLOCK if patch else "")
        + "\nvoid slow_swish_cpu(const float* x, float* y, int64_t n);\n\n"
        "void swish_forward(const at::Tensor& x, const at::Tensor& out) {\n"
        + (install if patch else "")
        + '  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "float32 expected");\n'
        '  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "bad tensors");\n'
        "  slow_swish_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());\n"
        "}\n\nREGISTER_BINDING(swish_forward, swish_forward);\n"
    )


def _score(tmp_path: Path, patch: bool) -> dict:
    return score_one(tmp_path, "swish", {"model_new.py": MODEL_NEW, "kernels/slow_swish.cpp": KERNEL,
                                         "kernels/swish_binding.cpp": binding(patch)})


def test_control_the_slow_honest_kernel_earns_no_milestone(tmp_path: Path) -> None:
    row = _score(tmp_path, patch=False)
    assert row["status"] == "correct", row
    assert row["reward"] == 1.0 and row["speedup_eager"] < 1.0, row


def test_a_native_patch_of_clock_gettime_earns_no_milestone(tmp_path: Path) -> None:
    row = _score(tmp_path, patch=True)
    # Before the fix: status 'correct', reward 3.0, speedup_eager ~10 (the same kernel's control reads ~0.1-0.2).
    assert row["status"] == "rejected" and row["rule"] in {"T23.cpp.system_call", "T8.cpp.clock"}, row
    assert row["reward"] < 2.0, (
        f"a kernel slower than eager earned reward {row['reward']} (speedup_eager {row['speedup_eager']}, "
        f"candidate_ms {row['candidate_ms']}) by patching libc's clock_gettime in its own process"
    )
    assert row["status"] != "correct" or row["speedup_eager"] < 1.0, row


# relu(x @ W^T + b) with the product done by MKL's Fortran-style ``sgemm`` (exported by libtorch_cpu.so).
MKL_MODEL_NEW = '''"""relu(x @ W^T + b); the nn.Linear only holds the parameters."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, dtype=x.dtype, device=x.device)
        cuda_extension.gemm_bias_relu_forward(x, self.linear.weight, self.linear.bias, out)
        return out
'''

MKL_KERNEL = r"""
#include <cstdint>

extern "C" void sgemm(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                      const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                      const float* beta, float* c, const int* ldc);

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) out[i * n + j] = bias[j];
  const int N = (int)n, M = (int)m, K = (int)k;
  const float one = 1.0f;
  sgemm("T", "N", &N, &M, &K, &one, w, &K, a, &K, &one, out, &N);
  for (int64_t i = 0; i < m * n; ++i) out[i] = out[i] > 0.0f ? out[i] : 0.0f;
}
"""

MKL_BINDING = r"""
#include "../binding_registry.h"

void gemm_bias_relu_cpu(const float* a, const float* w, const float* bias, float* out, int64_t m, int64_t n, int64_t k);

void gemm_bias_relu_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& out) {
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous() && out.is_contiguous(), "contiguous");
  gemm_bias_relu_cpu(x.const_data_ptr<float>(), weight.const_data_ptr<float>(), bias.const_data_ptr<float>(),
                     out.mutable_data_ptr<float>(), x.size(0), weight.size(0), x.size(1));
}

REGISTER_BINDING(gemm_bias_relu_forward, gemm_bias_relu_forward);
"""


def test_mkl_sgemm_exported_by_libtorch_is_refused_as_a_vendor_library(tmp_path: Path) -> None:
    row = score_one(tmp_path, "gemm_bias_relu", {"model_new.py": MKL_MODEL_NEW, "kernels/gemm_bias_relu.cpp": MKL_KERNEL,
                                                 "kernels/gemm_bias_relu_binding.cpp": MKL_BINDING})
    # Before the fix: status 'correct', reward 1.0, rule None (speedup_eager ~1.0, against ~0.6 for the honest example kernel).
    assert row["status"] == "rejected", row
    assert (row["rule"] or "").startswith("T1.") and "vendor_library" in row["rule"], row
