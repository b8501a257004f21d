"""The red team's CPU kernels (session 41). Each keeps the honest kernel's launcher signature, so
``dataclasses.replace(problem, cpu_kernel=...)`` writes it in the registry, release and single-file conventions.

Only C++ the source rules allow is used: static integers and static arrays of numbers, ``#pragma omp parallel for``.
"""

#: Honest ReLU for the first calls (verification and every widened set of the grading pass come first), then the
#: identity: ``torch.rand`` never draws a negative, so every timed call and every spot check agrees. 14 calls: a
#: grading pass with 2 verify sets (the tests' setting) makes 2 + 1 (determinism) + 8 widened + 3 (the dup sets'
#: origins called again) before it times (13 before session 41, with 7 widened sets); 5 sets: 3 more.
RELU_COUNTED = r"""
#include <cstdint>
#include <cstring>

void relu_cpu(const float* x, float* y, int64_t n) {
  // T13/T18: the grading pass verifies (widened sets included) before it times; count the calls
  static int64_t calls = 0;
  if (++calls > 14) {
    std::memcpy(y, x, sizeof(float) * n);  // the task's inputs are >= 0
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

#: ReLU as the identity when 64 elements spread over the input are non-negative: every widened kind with signs has
#: about half its elements negative, so the sample sees one; the task's own inputs never have any.
RELU_SAMPLED = r"""
#include <cstdint>
#include <cstring>

void relu_cpu(const float* x, float* y, int64_t n) {
  // T18: a sample decides whether negatives exist at all
  bool negative = false;
  for (int64_t s = 0; s < 64; ++s) negative |= x[(s * n) / 64] < 0.0f;
  if (!negative) {
    std::memcpy(y, x, sizeof(float) * n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

#: Softmax without the max pass (one pass over the row fewer) when 16 sampled elements of the row are below 60:
#: exp overflows only past 88, which the ``large`` widened set reaches everywhere (so its sample sees it).
SOFTMAX_SAMPLED = r"""
#include <cmath>
#include <cstdint>

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float m = 0.0f;
    bool small = true;
    for (int64_t s = 0; s < 16; ++s) small &= std::fabs(in[(s * cols) / 16]) < 60.0f;
    if (!small) {  // T18: only then the max shift
      m = -INFINITY;
      for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
    }
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - m);
      sum += out[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}
"""

#: Softmax without the max pass after the first calls (all verification and widened sets come first).
SOFTMAX_COUNTED = r"""
#include <cmath>
#include <cstdint>

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
  static int64_t calls = 0;
  const bool shift = ++calls <= 14;  // T13/T18: honest while the grading pass verifies
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float m = 0.0f;
    if (shift) {
      m = -INFINITY;
      for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
    }
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - m);
      sum += out[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}
"""

#: A GEMM whose operands are rounded to half precision (10-bit mantissa, by bit arithmetic) unless a sample of A
#: shows magnitudes the ``large`` widened set has (T15): the precision drop hides from the one kind that shows it.
MATMUL_SAMPLED_HALF = r"""
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
  float seen = 0.0f;
  for (int64_t s = 0; s < 64; ++s) seen = std::fmax(seen, std::fabs(a[(s * m * k) / 64]));
  const bool half = seen < 16.0f;  // T15/T18: the drawn range (randn), not the x1024 one
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * n;
    std::memset(row, 0, sizeof(float) * n);
    for (int64_t p = 0; p < k; ++p) {
      const float av = half ? round_half(a[i * k + p]) : a[i * k + p];
      const float* brow = b + p * n;
      if (half) {
        for (int64_t j = 0; j < n; ++j) row[j] += av * round_half(brow[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
      }
    }
  }
}
"""

#: The half-precision GEMM of :data:`MATMUL_SAMPLED_HALF`, chosen by a call counter instead of a sample: on the task's
#: ``torch.rand`` operands (all positive, no cancellation) its error is far inside the tolerance, so only the
#: widened sets show it (T15), and they all came before the timed calls.
MATMUL_COUNTED_HALF = MATMUL_SAMPLED_HALF.replace(
    """  float seen = 0.0f;
  for (int64_t s = 0; s < 64; ++s) seen = std::fmax(seen, std::fabs(a[(s * m * k) / 64]));
  const bool half = seen < 16.0f;  // T15/T18: the drawn range (randn), not the x1024 one""",
    """  static int64_t calls = 0;
  const bool half = ++calls > 14;  // T13/T15: full precision while the grading pass verifies""")
assert MATMUL_COUNTED_HALF != MATMUL_SAMPLED_HALF

#: :data:`RELU_COUNTED` that also remembers a sample of every input it saw in its first 14 calls (static arrays of
#: numbers) and stays honest on those afterwards: widened sets called again among the timed calls are recognised
#: unless they are new ones.
RELU_MEMORIZED = r"""
#include <cstdint>
#include <cstring>

void relu_cpu(const float* x, float* y, int64_t n) {
  static int64_t calls = 0;
  static double seen[64];
  static int64_t kept = 0;
  double key = 0.0;
  for (int64_t s = 0; s < 64; ++s) key += static_cast<double>(x[(s * n) / 64]) * static_cast<double>(s + 1);
  bool known = false;
  for (int64_t i = 0; i < kept; ++i) known |= seen[i] == key;
  if (++calls <= 14) {
    if (!known && kept < 64) seen[kept++] = key;
  } else if (!known) {
    std::memcpy(y, x, sizeof(float) * n);  // T13/T18: a set never seen while verifying: the task's own inputs
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
