// Registers cuda_extension.row_sum_forward(x, out).
#include "../binding_registry.h"

void row_sum_cpu(const float* x, float* out, int64_t rows, int64_t cols);

void row_sum_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "row_sum_forward: contiguous 2-D float32 x expected");
  TORCH_CHECK(out.numel() == x.size(0) && out.scalar_type() == at::kFloat, "row_sum_forward: out must hold one float32 per row");
  row_sum_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.size(0), x.size(1));
}

REGISTER_BINDING(row_sum_forward, row_sum_forward);
