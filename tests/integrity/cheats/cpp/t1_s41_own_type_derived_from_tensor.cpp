// expect: T1.cpp.aten_method
// Session 41 allows a method call on the candidate's own struct that defines that method (Welford's add/mean); a
// struct deriving from at::Tensor inherits the tensor's compute methods, and `acc.sum()` there stays refused.
#include <ATen/core/Tensor.h>

struct Acc : at::Tensor {
  explicit Acc(const at::Tensor& t) : at::Tensor(t) {}
  void add(float) {}
};

at::Tensor total(const at::Tensor& x) {
  Acc acc(x);
  acc.add(1.f);
  return acc.sum();
}
