// Honest: what a slim binding imports (allocation op, TORCH_CHECK failure path, data_ptr) + OpenMP.
#include <algorithm>
#include <cstdint>
namespace c10 { namespace detail { [[noreturn]] void torchCheckFail(const char*, const char*, unsigned, const char*); } }
namespace at {
class Tensor { void* impl_; };
namespace _ops {
struct empty_like { static Tensor call(const Tensor&); };
struct view { static Tensor call(const Tensor&, long); };
}  // namespace _ops
}  // namespace at
at::Tensor alloc(const at::Tensor& x) {
  if (!&x) c10::detail::torchCheckFail("f", "file", 1, "msg");
  at::_ops::view::call(x, 1);
  return at::_ops::empty_like::call(x);
}
void relu(const float* x, float* y, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}
