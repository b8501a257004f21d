"""Honest kernels for five KernelBench problems, written once, laid out in each public solution convention.

Problems (the files vendored in ``tests/kernelbench/data``): level1 ``19_ReLU``, ``23_Softmax``,
``1_Square_matrix_multiplication_``; level2 ``12_Gemm_Multiply_LeakyReLU``; level3 ``1_MLP``.
Each has a C++/OpenMP kernel (cpu backend) and a CUDA kernel (cuda backend) computing in fp32, and
entry points that ``conventions.py`` wraps as a ``REGISTER_BINDING`` workspace, a CUDA-Agent release
workspace (``torch/extension.h`` + ``register_x(pybind11::module&)``) or a KernelBench ``load_inline`` file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EntryPoint:
    """One host function: its inputs, scalar parameters, the output's shape (C++), and the launcher call."""

    name: str
    tensors: tuple[str, ...]
    scalars: tuple[tuple[str, str], ...]  # (C++ type, name)
    out_shape: str  # C++ expression of the output's sizes, e.g. "{x.size(0), w.size(0)}"
    launch: str  # the launcher call; pointers as <name>_p, the output as out_p; CUDA adds the stream


@dataclass(frozen=True)
class Problem:
    """A KernelBench problem with its kernels and how ModelNew calls them."""

    stem: str
    level: int
    number: int
    kernel_name: str  # kernels/<kernel_name>.{cpp,cu}
    cpu_kernel: str
    cuda_kernel: str
    declarations: str  # the launchers' declarations (cpu form uses no stream)
    entries: tuple[EntryPoint, ...]
    init: str  # ModelNew.__init__ body (same parameters as Model)
    init_args: str
    forward: str  # ModelNew.forward body; `ext` is the extension (its entry points allocate their outputs)
    forward_args: str


RELU_CPU = r"""
#include <cstdint>

void relu_cpu(const float* x, float* y, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
RELU_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int64_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 65535 * 8 ? (want > 0 ? want : 1) : 65535 * 8);
  relu_kernel<<<blocks, threads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
"""

SOFTMAX_CPU = r"""
#include <cmath>
#include <cstdint>

void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
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
SOFTMAX_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <math.h>

// One block per row: a max pass, an exp-and-sum pass, a scaling pass, each a block reduction.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float red[256];
  const float* in = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = __expf(in[c] - m);
    out[c] = e;
    sum += e;
  }
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.0f / red[0];
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] *= inv;
}

cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  softmax_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(x, y, cols);
  return cudaGetLastError();
}
"""

# C = A @ B (row-major, fp32 accumulation), and y = act((x @ w^T + b) * scale) with act(v) = v > 0 ? v : slope * v.
MATMUL_CPU = r"""
#include <cstdint>
#include <cstring>

void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
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
"""
LINEAR_CPU = r"""
#include <cstdint>

void linear_act_cpu(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                    int64_t out, float scale, float slope) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      const float* xr = x + r * in;
      const float* wo = w + o * in;
      double acc = 0.0;
      for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(xr[i]) * wo[i];
      float v = (static_cast<float>(acc) + bias[o]) * scale;
      y[r * out + o] = v > 0.0f ? v : slope * v;
    }
  }
}
"""
TILED_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

constexpr int TILE = 32;

// C[m, n] = sum_p A[m, p] * B(p, n); B(p, n) = b[p * n_cols + n] (plain) or b[n * k + p] (transposed: a Linear weight).
template <bool kTransposedB, bool kEpilogue>
__global__ void tiled_gemm(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ bias,
                           float* __restrict__ c, int64_t m, int64_t k, int64_t n, float scale, float slope) {
  __shared__ float as[TILE][TILE];
  __shared__ float bs[TILE][TILE + 1];
  const int64_t row = blockIdx.y * (int64_t)TILE + threadIdx.y;
  const int64_t col = blockIdx.x * (int64_t)TILE + threadIdx.x;
  float acc = 0.0f;
  for (int64_t t = 0; t < k; t += TILE) {
    const int64_t ak = t + threadIdx.x;
    as[threadIdx.y][threadIdx.x] = (row < m && ak < k) ? a[row * k + ak] : 0.0f;
    const int64_t bk = t + threadIdx.y;
    float bv = 0.0f;
    if (bk < k && col < n) bv = kTransposedB ? b[col * k + bk] : b[bk * n + col];
    bs[threadIdx.y][threadIdx.x] = bv;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < TILE; ++p) acc += as[threadIdx.y][p] * bs[p][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) {
    float v = acc;
    if (kEpilogue) {
      v = (v + bias[col]) * scale;
      v = v > 0.0f ? v : slope * v;
    }
    c[row * n + col] = v;
  }
}

static dim3 grid_for(int64_t m, int64_t n) {
  return dim3(static_cast<unsigned>((n + TILE - 1) / TILE), static_cast<unsigned>((m + TILE - 1) / TILE));
}
"""
MATMUL_CUDA = TILED_CUDA + r"""
cudaError_t matmul_launch(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
                          cudaStream_t stream) {
  tiled_gemm<false, false><<<grid_for(m, n), dim3(TILE, TILE), 0, stream>>>(a, b, nullptr, c, m, k, n, 1.0f, 1.0f);
  return cudaGetLastError();
}
"""
LINEAR_CUDA = TILED_CUDA + r"""
cudaError_t linear_act_launch(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                              int64_t out, float scale, float slope, cudaStream_t stream) {
  tiled_gemm<true, true><<<grid_for(rows, out), dim3(TILE, TILE), 0, stream>>>(x, w, bias, y, rows, in, out, scale,
                                                                               slope);
  return cudaGetLastError();
}
"""

_LINEAR_ENTRY = EntryPoint(
    "linear_act_forward", ("x", "w", "b"), (("double", "scale"), ("double", "slope")), "{x.size(0), w.size(0)}",
    "linear_act_{dev}(x_p, w_p, b_p, out_p, x.size(0), x.size(1), w.size(0), (float)scale, (float)slope{stream})",
)

PROBLEMS: tuple[Problem, ...] = (
    Problem("19_ReLU", 1, 19, "relu", RELU_CPU, RELU_CUDA,
            "void relu_cpu(const float* x, float* y, int64_t n);\n"
            "cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);\n",
            (EntryPoint("relu_forward", ("x",), (), "x.sizes()", "relu_{dev}(x_p, out_p, x.numel(){stream})"),),
            "", "", "return ext.relu_forward(x)", "x"),
    Problem("23_Softmax", 1, 23, "softmax", SOFTMAX_CPU, SOFTMAX_CUDA,
            "void softmax_cpu(const float* x, float* y, int64_t rows, int64_t cols);\n"
            "cudaError_t softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);\n",
            (EntryPoint("softmax_forward", ("x",), (), "x.sizes()",
                        "softmax_{dev}(x_p, out_p, x.size(0), x.size(1){stream})"),),
            "", "", "return ext.softmax_forward(x)", "x"),
    Problem("1_Square_matrix_multiplication_", 1, 1, "matmul", MATMUL_CPU, MATMUL_CUDA,
            "void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);\n"
            "cudaError_t matmul_launch(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, "
            "cudaStream_t stream);\n",
            (EntryPoint("matmul_forward", ("a", "b"), (), "{a.size(0), b.size(1)}",
                        "matmul_{dev}(a_p, b_p, out_p, a.size(0), a.size(1), b.size(1){stream})"),),
            "", "", "return ext.matmul_forward(A, B)", "A, B"),
    Problem("12_Gemm_Multiply_LeakyReLU", 2, 12, "gemm_scale_act", LINEAR_CPU, LINEAR_CUDA,
            "void linear_act_cpu(const float* x, const float* w, const float* bias, float* y, int64_t rows, "
            "int64_t in, int64_t out, float scale, float slope);\n"
            "cudaError_t linear_act_launch(const float* x, const float* w, const float* bias, float* y, int64_t rows, "
            "int64_t in, int64_t out, float scale, float slope, cudaStream_t stream);\n",
            (_LINEAR_ENTRY,),
            "self.gemm = nn.Linear(in_features, out_features)\n"
            "self.multiplier = multiplier\nself.negative_slope = negative_slope",
            "in_features, out_features, multiplier, negative_slope",
            "return ext.linear_act_forward(x, self.gemm.weight, self.gemm.bias, self.multiplier, "
            "self.negative_slope)", "x"),
    Problem("1_MLP", 3, 1, "mlp_linear", LINEAR_CPU, LINEAR_CUDA,
            "void linear_act_cpu(const float* x, const float* w, const float* bias, float* y, int64_t rows, "
            "int64_t in, int64_t out, float scale, float slope);\n"
            "cudaError_t linear_act_launch(const float* x, const float* w, const float* bias, float* y, int64_t rows, "
            "int64_t in, int64_t out, float scale, float slope, cudaStream_t stream);\n",
            (_LINEAR_ENTRY,),
            "layers = []\ncurrent_input_size = input_size\nfor layer_size in layer_sizes:\n"
            "    layers.append(nn.Linear(current_input_size, layer_size))\n    layers.append(nn.ReLU())\n"
            "    current_input_size = layer_size\nlayers.append(nn.Linear(current_input_size, output_size))\n"
            "self.network = nn.Sequential(*layers)",
            "input_size, layer_sizes, output_size",
            "# network = [Linear, ReLU] * hidden layers + [Linear]: a fused linear+ReLU per hidden layer.\n"
            "n = len(self.network)\nfor i in range(0, n, 2):\n    layer = self.network[i]\n"
            "    slope = 0.0 if i + 1 < n else 1.0\n"
            "    x = ext.linear_act_forward(x, layer.weight, layer.bias, 1.0, slope)\nreturn x", "x"),
)
