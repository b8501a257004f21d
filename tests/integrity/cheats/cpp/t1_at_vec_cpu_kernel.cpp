// expect: T1.cpp.aten_call
// Vectorized lambdas handed to ATen's own CPU loop (TensorIterator + at::native::cpu_kernel_vec): ATen runs the op.
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/vec.h>

at::Tensor relu_forward(const at::Tensor& x) {
  auto out = at::empty_like(x);
  auto iter = at::TensorIteratorConfig().add_output(out).add_const_input(x).build();
  at::native::cpu_kernel_vec(
      iter, [](float a) -> float { return a > 0.f ? a : 0.f; },
      [](at::vec::Vectorized<float> a) { return at::vec::maximum(a, at::vec::Vectorized<float>(0.f)); });
  return out;
}
