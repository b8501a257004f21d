// Static member functions returning tensors are not static state.
#include "../binding_registry.h"

#include <vector>

struct Launcher {
  static at::Tensor run(const at::Tensor& x) { return at::empty_like(x); }
  static std::vector<at::Tensor> run_pair(const at::Tensor& x) { return {at::empty_like(x), at::empty_like(x)}; }
};

at::Tensor forward(const at::Tensor& x) {
  static constexpr int kBlock = 256;
  static int calls_seen_for_logging = 0;  // a scalar counter is not flagged; only containers/tensors/pointers
  (void)calls_seen_for_logging;
  return Launcher::run(x).view({-1, x.size(-1) / kBlock * kBlock == x.size(-1) ? x.size(-1) : x.size(-1)});
}
