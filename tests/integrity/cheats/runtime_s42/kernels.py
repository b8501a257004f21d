"""Session 42's runtime red team: CPU kernels (tests/integrity/test_redteam_s42.py). Each keeps the honest kernel's
launcher signature (examples/solutions/kernelbench/kernels.py), so ``dataclasses.replace(problem, cpu_kernel=...)``
writes it in any convention. Only C++ the source rules allow: static integers and function-scope static arrays of
numbers, ``#pragma omp parallel for``.
"""

#: A content cache that plays fair until the fresh sets are behind it (T12/T13). Outputs are kept in static arrays,
#: keyed by 32 sampled elements of A and B; a key is stored only on its first sight (a ``dup`` widened set shares
#: its verify set's key and is computed, never stored). The stored outputs are used only after the 40th call on an
#: input it had seen: by then a grading pass of a big working set (one fresh call in all, in its first round) has
#: made its only fresh call, and every rotated call after it copies the right answer instead of computing it. Until
#: then a set it has seen is computed twice, so the fresh call (new data) is never slower than the rotated calls
#: just before it. A widened set among the timed calls is new data, so it is computed: every checked call is right.
MATMUL_CACHED_AFTER_FRESH = r"""
#include <cstdint>
#include <cstring>

static void gemm(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * n;
    std::memset(row, 0, sizeof(float) * n);
    for (int64_t p = 0; p < k; ++p) {
      const float av = a[i * k + p];
      const float* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
}

void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  constexpr int64_t kSlots = 16, kCap = 128 * 128, kKey = 32;
  static float keys[kSlots][kKey];
  static float outs[kSlots][kCap];
  static int64_t used = 0, seen_calls = 0;
  float key[kKey];
  for (int64_t s = 0; s < kKey / 2; ++s) {
    key[s] = a[(s * 7919 + 13) % (m * k)];
    key[kKey / 2 + s] = b[(s * 7877 + 29) % (k * n)];
  }
  int64_t slot = -1;
  for (int64_t i = 0; i < used && slot < 0; ++i) {
    if (std::memcmp(keys[i], key, sizeof(key)) == 0) slot = i;
  }
  const bool fits = m * n <= kCap;
  if (slot >= 0 && fits && ++seen_calls > 40) {  // T12/T13: past the fresh call, a rotated set: copy
    std::memcpy(c, outs[slot], sizeof(float) * m * n);
    return;
  }
  gemm(a, b, c, m, k, n);
  if (slot >= 0) gemm(a, b, c, m, k, n);  // before that, a set seen before runs slower than a new one
  if (slot < 0 && fits && used < kSlots) {
    std::memcpy(keys[used], key, sizeof(key));
    std::memcpy(outs[used], c, sizeof(float) * m * n);
    ++used;
  }
}
"""

#: A GEMM on operands rounded to half precision (10 mantissa bits, by bit arithmetic: T15) unless 64 sampled elements
#: of A or B leave [0, 1], the range ``torch.rand`` draws. Every widened kind with signs or a new scale (``wide``,
#: ``large``, ``shift``) moves the sample out of it, so those sets get the fp32 product; ``shrink`` (x/128), ``dup``
#: and ``spike`` keep the sample inside, and without dense signs there is little cancellation: the rounding stays
#: inside the tolerance but where two spikes of opposite sign cancel in one output element (test_redteam_s42.py).
#: Session 41's sampled GEMM gated on magnitude alone (|x| < 16), which the x4 ``wide`` kind did not pass.
MATMUL_RANGE_GATED_HALF = r"""
#include <cmath>
#include <cstdint>
#include <cstring>

static inline float round_half(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x1000u) & 0xFFFFE000u;  // keep 10 mantissa bits, as fp16 does
  std::memcpy(&v, &u, 4);
  return v;
}

void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  bool drawn = true;  // T15/T18: the task's own range, [0, 1]
  for (int64_t s = 0; s < 32; ++s) {
    const float va = a[(s * m * k) / 32], vb = b[(s * k * n) / 32];
    drawn &= va >= 0.0f && va <= 1.0f && vb >= 0.0f && vb <= 1.0f;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * n;
    std::memset(row, 0, sizeof(float) * n);
    for (int64_t p = 0; p < k; ++p) {
      const float av = drawn ? round_half(a[i * k + p]) : a[i * k + p];
      const float* brow = b + p * n;
      if (drawn) {
        for (int64_t j = 0; j < n; ++j) row[j] += av * round_half(brow[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
      }
    }
  }
}
"""
