// expect: T11.binary.tensor_construction
// An output on the candidate's memory with its own deleter (session 37's red team), compiled against torch's
// headers: the TensorImpl it makes is constructed in the extension.
#include <torch/extension.h>
static void on_free(void*) {}
torch::Tensor wrap(torch::Tensor x, float* buf) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), x.numel() * 4,
                       c10::DataPtr(buf, buf, on_free, x.device()), nullptr, false);
  return at::detail::make_tensor<c10::TensorImpl>(std::move(storage), x.key_set(), x.dtype());
}
