"""Sources of the protected binding files we author: ``binding_registry.h`` and ``binding.cpp``.

``binding_registry.h`` is the slim registration header: a kernel's
``*_binding.cpp`` includes it (it pulls in only ``ATen/core/Tensor.h``) and
writes ``REGISTER_BINDING(name, fn)`` for a plain C++ function taking and
returning tensors, integers, floats, bools and lists of those. The function is
wrapped in a boxed call that ``binding.cpp`` exposes to Python as
``cuda_extension.<name>``. Because the heavy pybind11/torch-Python headers
live only in ``binding.cpp``, which is compiled once per (backend, torch,
flags) and shared by every workspace, editing a binding recompiles one light
translation unit.

Release-style bindings (CUDA-Agent): a ``*_binding.cpp`` that includes
``torch/extension.h`` (or ``torch/types.h`` + ``torch/csrc/utils/pybind.h``)
and registers a function ``void register_x(pybind11::module& m)`` with the
same macro is accepted too: such a function is called with the module when
it is created.
"""

from __future__ import annotations

BINDING_REGISTRY_H = r"""// binding_registry.h -- written by cuda-agent; protected (edits are refused).
//
// Register a kernel entry point for Python in your kernels/<name>_binding.cpp:
//
//     #include "../binding_registry.h"
//     at::Tensor relu_forward(const at::Tensor& x);        // your function
//     REGISTER_BINDING(relu_forward, relu_forward);        // -> cuda_extension.relu_forward(x)
//
// Accepted parameter types: at::Tensor (by value, const& or &: an output
// written in place), std::optional<at::Tensor> (None from Python), int64_t,
// int, double, float, bool, std::vector<at::Tensor>, std::vector<int64_t>.
// Accepted return types: void, at::Tensor, std::optional<at::Tensor>,
// std::vector<at::Tensor>, std::vector<int64_t>, std::tuple<at::Tensor, ...>,
// int64_t, double, bool.
//
// CUDA launches: use the stream torch uses, never a stream of your own:
//     auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x));
//
// Release style also works: REGISTER_BINDING(name, register_fn) where
// register_fn is `void register_fn(pybind11::module& m)` (that file then
// needs torch/extension.h and compiles much slower).
#pragma once
// A guard as well: the build force-includes a precompiled copy of this header,
// and the guard makes the workspace's own copy a no-op after it.
#ifndef CUDA_AGENT_BINDING_REGISTRY_H_
#define CUDA_AGENT_BINDING_REGISTRY_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cuda_agent_binding {

// One argument or result crossing the Python boundary.
struct Value {
  enum class Kind { None, Tensor, Int, Double, Bool, TensorList, IntList, Tuple };
  Kind kind = Kind::None;
  at::Tensor tensor;
  int64_t i = 0;
  double d = 0.0;
  bool b = false;
  std::vector<at::Tensor> tensors;
  std::vector<int64_t> ints;
  std::vector<Value> items;
};

inline const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::None: return "None";
    case Value::Kind::Tensor: return "Tensor";
    case Value::Kind::Int: return "int";
    case Value::Kind::Double: return "float";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::TensorList: return "list[Tensor]";
    case Value::Kind::IntList: return "list[int]";
    case Value::Kind::Tuple: return "tuple";
  }
  return "?";
}

using Boxed = std::function<Value(const std::vector<Value>&)>;
using ErasedHook = void (*)();  // a `void(pybind11::module&)` function, type-erased

struct Entry {
  std::string name;
  std::string doc;
  int arity;          // -1 for module hooks
  Boxed call;         // empty for module hooks
  ErasedHook module_hook;  // nullptr for boxed functions
};

// Defined in binding.cpp (one registry per extension module).
std::vector<Entry>& registry();

// The stream torch currently uses on `t`'s device, as its native handle: on
// CUDA cast it to cudaStream_t and launch there, e.g.
//   auto stream = static_cast<cudaStream_t>(cuda_agent_binding::current_stream(x));
// (device-generic, so bindings need no c10/cuda headers).
inline void* current_stream(const at::Tensor& t) {
  c10::impl::VirtualGuardImpl impl(t.device().type());
  return impl.getStream(t.device()).native_handle();
}

[[noreturn]] inline void bad_arg(const char* fn, std::size_t index, const char* expected, const Value& got) {
  throw std::invalid_argument(std::string("cuda_extension.") + fn + ": argument " + std::to_string(index) +
                              " must be " + expected + ", got " + kind_name(got.kind));
}

// Any other parameter type stops the build with this message.
template <class T> struct Unbox {
  static_assert(sizeof(T) == 0,
                "REGISTER_BINDING: unsupported parameter type. Accepted: at::Tensor (by value, const& or &), "
                "std::optional<at::Tensor>, int64_t, int, double, float, bool, std::vector<at::Tensor>, "
                "std::vector<int64_t> (each by value or reference)");
};
template <> struct Unbox<at::Tensor> {
  static at::Tensor get(const Value& v, const char* fn, std::size_t i) {
    if (v.kind != Value::Kind::Tensor) bad_arg(fn, i, "a Tensor", v);
    return v.tensor;
  }
};
template <> struct Unbox<int64_t> {
  static int64_t get(const Value& v, const char* fn, std::size_t i) {
    if (v.kind == Value::Kind::Int) return v.i;
    if (v.kind == Value::Kind::Bool) return v.b ? 1 : 0;
    bad_arg(fn, i, "an int", v);
  }
};
template <> struct Unbox<int> {
  static int get(const Value& v, const char* fn, std::size_t i) { return static_cast<int>(Unbox<int64_t>::get(v, fn, i)); }
};
template <> struct Unbox<double> {
  static double get(const Value& v, const char* fn, std::size_t i) {
    if (v.kind == Value::Kind::Double) return v.d;
    if (v.kind == Value::Kind::Int) return static_cast<double>(v.i);
    bad_arg(fn, i, "a float", v);
  }
};
template <> struct Unbox<float> {
  static float get(const Value& v, const char* fn, std::size_t i) { return static_cast<float>(Unbox<double>::get(v, fn, i)); }
};
template <> struct Unbox<bool> {
  static bool get(const Value& v, const char* fn, std::size_t i) {
    if (v.kind != Value::Kind::Bool) bad_arg(fn, i, "a bool", v);
    return v.b;
  }
};
template <> struct Unbox<std::vector<at::Tensor>> {
  static std::vector<at::Tensor> get(const Value& v, const char* fn, std::size_t i) {
    if (v.kind != Value::Kind::TensorList) bad_arg(fn, i, "a list of Tensors", v);
    return v.tensors;
  }
};
template <> struct Unbox<std::vector<int64_t>> {
  static std::vector<int64_t> get(const Value& v, const char* fn, std::size_t i) {
    if (v.kind != Value::Kind::IntList) bad_arg(fn, i, "a list of ints", v);
    return v.ints;
  }
};

template <class T> struct Unbox<std::optional<T>> {
  static std::optional<T> get(const Value& v, const char* fn, std::size_t i) {
    if (v.kind == Value::Kind::None) return std::nullopt;
    return Unbox<T>::get(v, fn, i);
  }
};

// Any other return type stops the build with this message.
template <class T>
Value box(T) {
  static_assert(sizeof(T) == 0,
                "REGISTER_BINDING: unsupported return type. Accepted: void, at::Tensor, std::optional<at::Tensor>, "
                "std::vector<at::Tensor>, std::vector<int64_t>, std::tuple<...> of those, int64_t, int, double, "
                "float, bool");
  return Value();
}
inline Value box(at::Tensor t) { Value v; v.kind = Value::Kind::Tensor; v.tensor = std::move(t); return v; }
inline Value box(std::vector<at::Tensor> ts) { Value v; v.kind = Value::Kind::TensorList; v.tensors = std::move(ts); return v; }
inline Value box(std::vector<int64_t> xs) { Value v; v.kind = Value::Kind::IntList; v.ints = std::move(xs); return v; }
inline Value box(int64_t x) { Value v; v.kind = Value::Kind::Int; v.i = x; return v; }
inline Value box(int x) { return box(static_cast<int64_t>(x)); }
inline Value box(double x) { Value v; v.kind = Value::Kind::Double; v.d = x; return v; }
inline Value box(float x) { return box(static_cast<double>(x)); }
inline Value box(bool x) { Value v; v.kind = Value::Kind::Bool; v.b = x; return v; }
inline Value box(std::optional<at::Tensor> t) { return t.has_value() ? box(std::move(*t)) : Value(); }
template <class... T>
Value box(std::tuple<T...> t) {
  Value v;
  v.kind = Value::Kind::Tuple;
  std::apply([&v](auto&&... e) { (v.items.push_back(box(std::move(e))), ...); }, std::move(t));
  return v;
}

template <class R, class... A, std::size_t... I>
Value call_unboxed(R (*fn)(A...), const std::vector<Value>& args, const char* name, std::index_sequence<I...>) {
  // Unboxed into locals first, so that a non-const reference parameter (`at::Tensor& out`) binds to one.
  std::tuple<std::decay_t<A>...> values{Unbox<std::decay_t<A>>::get(args[I], name, I)...};
  (void)values;
  if constexpr (std::is_void_v<R>) {
    fn(std::forward<A>(std::get<I>(values))...);
    return Value();
  } else {
    return box(fn(std::forward<A>(std::get<I>(values))...));
  }
}

// A `void f(pybind11::module&)` (release style): one non-const lvalue
// reference to a class that is not a tensor, an optional or a vector.
template <class R, class... A>
constexpr bool is_module_hook() {
  if constexpr (std::is_void_v<R> && sizeof...(A) == 1) {
    using A0 = std::tuple_element_t<0, std::tuple<A...>>;
    using Base = std::remove_reference_t<A0>;
    return std::is_lvalue_reference_v<A0> && !std::is_const_v<Base> && std::is_class_v<Base> &&
           !std::is_same_v<Base, at::Tensor> && !std::is_same_v<Base, std::optional<at::Tensor>> &&
           !std::is_same_v<Base, std::vector<at::Tensor>> && !std::is_same_v<Base, std::vector<int64_t>>;
  }
  return false;
}

struct Registrar {
  template <class R, class... A>
  Registrar(const char* name, R (*fn)(A...), const char* doc = "") {
    if constexpr (is_module_hook<R, A...>()) {
      registry().push_back(Entry{name, doc, -1, Boxed(), reinterpret_cast<ErasedHook>(fn)});
    } else {
      const std::string fname = name;
      Boxed call = [fn, fname](const std::vector<Value>& args) -> Value {
        if (args.size() != sizeof...(A)) {
          throw std::invalid_argument("cuda_extension." + fname + " takes " + std::to_string(sizeof...(A)) +
                                      " arguments, got " + std::to_string(args.size()));
        }
        return call_unboxed(fn, args, fname.c_str(), std::index_sequence_for<A...>{});
      };
      registry().push_back(Entry{name, doc, static_cast<int>(sizeof...(A)), std::move(call), nullptr});
    }
  }
};

}  // namespace cuda_agent_binding

#define CUDA_AGENT_CONCAT_INNER(a, b) a##b
#define CUDA_AGENT_CONCAT(a, b) CUDA_AGENT_CONCAT_INNER(a, b)

// REGISTER_BINDING(name, fn): expose `fn` as cuda_extension.<name>.
#define REGISTER_BINDING(name, fn) \
  static ::cuda_agent_binding::Registrar CUDA_AGENT_CONCAT(cuda_agent_registrar_, name)(#name, fn)

// REGISTER_BINDING_DOC(name, fn, "docstring"): the same, with a Python docstring.
#define REGISTER_BINDING_DOC(name, fn, doc) \
  static ::cuda_agent_binding::Registrar CUDA_AGENT_CONCAT(cuda_agent_registrar_, name)(#name, fn, doc)

#endif  // CUDA_AGENT_BINDING_REGISTRY_H_
"""

BINDING_CPP = r"""// binding.cpp -- written by cuda-agent; protected (edits are refused).
// Defines the Python module `cuda_extension` from every REGISTER_BINDING in
// the workspace. Compiled once per (backend, torch version, flags) and shared.
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "binding_registry.h"

namespace py = pybind11;

namespace cuda_agent_binding {

std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

}  // namespace cuda_agent_binding

namespace {

using cuda_agent_binding::Value;

Value from_python(py::handle h, const std::string& fn, std::size_t index) {
  Value v;
  if (h.is_none()) return v;
  if (THPVariable_Check(h.ptr())) {
    v.kind = Value::Kind::Tensor;
    v.tensor = THPVariable_Unpack(h.ptr());
    return v;
  }
  if (py::isinstance<py::bool_>(h)) { v.kind = Value::Kind::Bool; v.b = h.cast<bool>(); return v; }
  if (py::isinstance<py::int_>(h)) { v.kind = Value::Kind::Int; v.i = h.cast<int64_t>(); return v; }
  if (py::isinstance<py::float_>(h)) { v.kind = Value::Kind::Double; v.d = h.cast<double>(); return v; }
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(h);
    bool all_tensors = true, all_ints = true;
    for (auto item : seq) {
      all_tensors = all_tensors && THPVariable_Check(item.ptr());
      all_ints = all_ints && py::isinstance<py::int_>(item) && !py::isinstance<py::bool_>(item);
    }
    if (all_tensors && seq.size() > 0) {
      v.kind = Value::Kind::TensorList;
      for (auto item : seq) v.tensors.push_back(THPVariable_Unpack(item.ptr()));
      return v;
    }
    if (all_ints) {
      v.kind = Value::Kind::IntList;
      for (auto item : seq) v.ints.push_back(item.cast<int64_t>());
      return v;
    }
  }
  throw py::type_error("cuda_extension." + fn + ": argument " + std::to_string(index) + " has unsupported type " +
                       std::string(py::str(py::type::handle_of(h))) +
                       " (supported: Tensor, int, float, bool, None, lists of Tensors or ints)");
}

py::object to_python(const Value& v) {
  switch (v.kind) {
    case Value::Kind::None: return py::none();
    case Value::Kind::Tensor: return py::cast(v.tensor);
    case Value::Kind::Int: return py::int_(v.i);
    case Value::Kind::Double: return py::float_(v.d);
    case Value::Kind::Bool: return py::bool_(v.b);
    case Value::Kind::TensorList: {
      py::list out;
      for (const auto& t : v.tensors) out.append(py::cast(t));
      return out;
    }
    case Value::Kind::IntList: return py::cast(v.ints);
    case Value::Kind::Tuple: {
      py::tuple out(v.items.size());
      for (std::size_t k = 0; k < v.items.size(); ++k) out[k] = to_python(v.items[k]);
      return out;
    }
  }
  return py::none();
}

}  // namespace

PYBIND11_MODULE(cuda_extension, m) {
  m.doc() = "Kernels of this workspace, registered with REGISTER_BINDING (binding_registry.h).";
  for (auto& entry : cuda_agent_binding::registry()) {
    if (entry.module_hook != nullptr) {
      reinterpret_cast<void (*)(py::module_&)>(entry.module_hook)(m);
      continue;
    }
    const cuda_agent_binding::Entry* e = &entry;
    m.def(
        entry.name.c_str(),
        [e](py::args args) {
          std::vector<Value> values;
          values.reserve(args.size());
          for (std::size_t k = 0; k < args.size(); ++k) values.push_back(from_python(args[k], e->name, k));
          Value result;
          {
            py::gil_scoped_release no_gil;
            result = e->call(values);
          }
          return to_python(result);
        },
        entry.doc.c_str());
  }
}
"""
