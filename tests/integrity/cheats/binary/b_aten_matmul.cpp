// expect: T1.binary.aten_op
// Declares the ATen operator entry point itself (what at::matmul inlines to).
namespace at { class Tensor { void* impl_; }; namespace _ops { struct matmul { static Tensor call(const Tensor&, const Tensor&); }; } }
at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) { return at::_ops::matmul::call(a, b); }
