// Honest (session 41, CUDA-Agent release convention, binding of h_s41_rel_cuda_softmax.cu).
#include <torch/extension.h>

#include "../binding_registry.h"

torch::Tensor softmax_cuda(torch::Tensor x);

void register_softmax(pybind11::module& m) {
  m.def("softmax_forward", &softmax_cuda, "row softmax (CUDA, cub::BlockReduce)");
}

REGISTER_BINDING(softmax, register_softmax);
