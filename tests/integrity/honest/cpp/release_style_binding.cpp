// CUDA-Agent release style: torch/extension.h, pybind11 registration, macros with stringizing.
#include <torch/extension.h>
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include <vector>

#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) \
  CHECK_CUDA(x);       \
  CHECK_CONTIGUOUS(x)

void axpby_launch(const float* a, const float* b, float* out, float alpha, float beta, int64_t n, cudaStream_t stream);

std::vector<torch::Tensor> axpby_forward(torch::Tensor a, torch::Tensor b, double alpha, double beta) {
  CHECK_INPUT(a);
  CHECK_INPUT(b);
  auto out = torch::empty(a.sizes(), a.options().dtype(torch::kFloat32));
  auto aux = torch::zeros({a.size(0)}, torch::TensorOptions().device(a.device()).dtype(torch::kFloat32));
  axpby_launch(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), static_cast<float>(alpha),
               static_cast<float>(beta), a.numel(), at::cuda::getCurrentCUDAStream());
  return {out, aux};
}

void register_axpby(pybind11::module& m) {
  m.def("axpby_forward", &axpby_forward, "axpby (CUDA)", py::arg("a"), py::arg("b"), py::arg("alpha"), py::arg("beta"));
}
