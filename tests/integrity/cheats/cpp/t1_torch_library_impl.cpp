// expect: T1.cpp.dispatcher
#include <torch/extension.h>
at::Tensor fake_allclose(const at::Tensor&, const at::Tensor&) { return at::empty({}); }
TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("allclose", fake_allclose); }
