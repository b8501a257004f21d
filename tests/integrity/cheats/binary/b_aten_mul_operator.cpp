// expect: T1.binary.aten_op
// What `a * b` on at::Tensor compiles to.
namespace at { class Tensor { void* impl_; }; namespace _ops { struct mul_Tensor { static Tensor call(const Tensor&, const Tensor&); }; } }
at::Tensor scale(const at::Tensor& a, const at::Tensor& b) { return at::_ops::mul_Tensor::call(a, b); }
