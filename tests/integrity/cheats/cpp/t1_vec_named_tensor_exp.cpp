// expect: T1.cpp.aten_method
// A Tensor named like a SIMD vector beside real at::vec code: `vec.exp()` is at::exp, whatever the name says.
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/vec.h>

using Vec = at::vec::Vectorized<float>;

void unused_simd(const float* x, float* y) { Vec::loadu(x).store(y); }

at::Tensor exp_forward(const at::Tensor& vec) { return vec.exp(); }
