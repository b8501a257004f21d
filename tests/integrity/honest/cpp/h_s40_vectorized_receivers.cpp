// Honest (session 40): every form in which a Vectorized receiver is provable: declared with the type, an alias
// (using, typedef, a template alias), unqualified after `using at::vec::Vectorized;`, `auto` from a factory or a
// free function, a method chain, arithmetic with numbers and scalars, inside at::vec::map's lambda.
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <cstdint>

using at::vec::Vectorized;
using Vec = at::vec::Vectorized<float>;
typedef at::vec::Vectorized<float> fVec;
template <class T>
using VecT = at::vec::Vectorized<T>;

void gelu_tanh_cpu(const float* x, float* y, int64_t n, float scale) {
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) {
    Vec v = Vec::loadu(x + i);
    auto inner = (v + v * v * v * Vec(0.044715f)) * Vec(0.7978845608f);
    auto t = inner.tanh();
    (v * (t + Vec(1.0f)) * Vec(0.5f) * scale).store(y + i);
  }
}

void log_exp_cpu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i + fVec::size() <= n; i += fVec::size()) {
    fVec a = fVec::loadu(x + i);
    Vectorized<float> b = Vectorized<float>::loadu(x + i);
    a.exp().log().store(y + i);
    at::vec::maximum(a, b).sqrt().store(y + i);
    at::vec::Vectorized<float>::loadu(x + i).abs().neg().exp().store(y + i);
    (-b).exp().store(y + i);
    (2.0f * a).log1p().store(y + i);
  }
}

template <class scalar_t>
void exp_any(const scalar_t* x, scalar_t* y, int64_t n) {
  for (int64_t i = 0; i + VecT<scalar_t>::size() <= n; i += VecT<scalar_t>::size()) {
    const auto v = VecT<scalar_t>::loadu(x + i);
    v.exp().store(y + i);
  }
}

void exp_map(const float* x, float* y, int64_t n) {
  at::vec::map([](Vec v) { return v.exp(); }, y, x, n);
  exp_any<float>(x, y, n);
}
