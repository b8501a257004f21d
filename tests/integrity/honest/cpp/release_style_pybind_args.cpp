// CUDA-Agent release style with the pybind11 idioms honest bindings use: a py alias, keyword arguments,
// defaults (py::none() for an optional tensor), a docstring, the GIL released around the launch.
#include <torch/extension.h>

#include <optional>

namespace py = pybind11;

void scale_launch(const float* x, float* y, float a, int64_t n, cudaStream_t stream);

torch::Tensor scale_forward(torch::Tensor x, double a, std::optional<torch::Tensor> out) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
  auto y = out.has_value() ? *out : torch::empty_like(x);
  scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(a), x.numel(),
               at::cuda::getCurrentCUDAStream());
  return y;
}

void register_scale(pybind11::module_& m) {
  m.def("scale_forward", &scale_forward, "y = a * x", py::arg("x"), py::arg("a") = 1.0, py::arg("out") = py::none(),
        py::call_guard<py::gil_scoped_release>());
}
