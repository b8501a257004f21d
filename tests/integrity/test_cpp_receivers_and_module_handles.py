"""Session 40's source rules across a workspace's files: Vectorized receivers (``T1.cpp.aten_method``) and pybind11
module handles (``T1.cpp.module_handle``). The single-file forms are the corpus (``cheats/cpp/t1_vec_*``,
``t1_pybind_*``, ``honest/cpp/h_s40_*``); these are the cases that need more than one file."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.harness.integrity import check_cpp_text, check_sources

MODEL_NEW = ("import torch\nimport cuda_extension\n\n\nclass ModelNew(torch.nn.Module):\n"
             "    def forward(self, x):\n        return cuda_extension.g(x)\n")
VEC_KERNEL = ('#include "ops.h"\n'
              "void simd(const float* p, float* q, float s) { Vec v = Vec::loadu(p); (s * v).exp().store(q); }\n"
              "at::Tensor g(const at::Tensor& x) { return v.exp(); }\n")


def _workspace(tmp_path: Path, files: dict[str, str]) -> list[tuple[str, str | None, int | None]]:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "model_new.py").write_text(MODEL_NEW)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return [(v.rule, v.file, v.line) for v in check_sources(tmp_path, "cpu")]


def test_a_declaration_in_a_workspace_header_keeps_the_tensor_method_refused(tmp_path: Path) -> None:
    header = ("#pragma once\n#include <ATen/core/Tensor.h>\n#include <ATen/cpu/vec/vec.h>\n"
              "using Vec = at::vec::Vectorized<float>;\nextern at::Tensor v;\n")
    found = _workspace(tmp_path, {"kernels/ops.h": header, "kernels/k.cpp": VEC_KERNEL})
    # `v` is a tensor declared in the header: line 3's v.exp() is at::exp. Line 2's `v` is the Vectorized local, but
    # a name is proven only when every declaration of it (header included) is a Vectorized one.
    assert ("T1.cpp.aten_method", "kernels/k.cpp", 3) in found, found


def test_an_alias_from_a_workspace_header_proves_the_receiver(tmp_path: Path) -> None:
    header = "#pragma once\n#include <ATen/cpu/vec/vec.h>\nusing Vec = at::vec::Vectorized<float>;\n"
    kernel = VEC_KERNEL.replace("at::Tensor g(const at::Tensor& x) { return v.exp(); }\n", "")
    assert _workspace(tmp_path, {"kernels/ops.h": header, "kernels/k.cpp": kernel}) == []
    # Checked alone, the file cannot see the header: its alias is unknown, so `.exp()` stays refused there.
    assert [v.rule for v in check_cpp_text(kernel, "kernels/k.cpp")] == ["T1.cpp.aten_method"]


def test_an_operator_declared_in_a_header_stops_arithmetic_from_proving_a_vectorized(tmp_path: Path) -> None:
    header = ("#pragma once\n#include <ATen/core/Tensor.h>\n#include <ATen/cpu/vec/vec.h>\n"
              "using Vec = at::vec::Vectorized<float>;\nat::Tensor operator*(float s, const Vec& v);\n")
    kernel = VEC_KERNEL.replace("at::Tensor g(const at::Tensor& x) { return v.exp(); }\n", "")
    assert ("T1.cpp.aten_method", "kernels/k.cpp", 2) in _workspace(tmp_path, {"kernels/ops.h": header,
                                                                                "kernels/k.cpp": kernel})


def test_a_registration_declared_in_another_file_may_be_called_with_m_but_not_bound(tmp_path: Path) -> None:
    helpers = ("#include <torch/extension.h>\n"
               "void register_helpers(pybind11::module& m) { m.def(\"h\", [](torch::Tensor x) { return x; }); }\n")
    header = "#pragma once\n#include <torch/extension.h>\nvoid register_helpers(pybind11::module& m);\n"
    calls = ('#include "reg.h"\n'
             "void register_main(pybind11::module& m) { register_helpers(m); }\n")
    assert _workspace(tmp_path, {"kernels/helpers_binding.cpp": helpers, "kernels/reg.h": header,
                                 "kernels/main_binding.cpp": calls}) == []
    bound = ('#include "reg.h"\n'
             "void register_main(pybind11::module& m) { m.def(\"install\", &register_helpers); }\n")
    (tmp_path / "kernels" / "main_binding.cpp").write_text(bound)
    found = [(v.rule, v.file, v.line) for v in check_sources(tmp_path, "cpu")]
    assert found == [("T1.cpp.module_handle", "kernels/main_binding.cpp", 2)], found


def test_the_message_says_what_the_registration_module_may_do() -> None:
    src = ("#include <torch/extension.h>\n"
           "void register_x(pybind11::module& m) {\n  auto sub = m.def_submodule(\"ops\");\n}\n")
    (v,) = check_cpp_text(src, "kernels/x_binding.cpp")
    assert (v.rule, v.line) == ("T1.cpp.module_handle", 3)
    assert "m.def(...)" in v.message and "m.doc() = ..." in v.message and "register_other(m)" in v.message


def test_a_registration_in_a_namespace_is_judged_by_its_qualified_uses() -> None:
    head = "#include <torch/extension.h>\nnamespace ops {\nvoid install(pybind11::module& t) { t.def(\"x\", &f); }\n}\n"
    bound = head + "void register_f(pybind11::module& m) { m.def(\"install\", &ops::install); }\n"
    assert [(v.rule, v.line) for v in check_cpp_text(bound, "kernels/f_binding.cpp")] == [("T1.cpp.module_handle", 5)]
    registered = head + ("void register_f(pybind11::module& m) { ops::install(m); }\n"
                         "void ops::install2(pybind11::module& m);\nREGISTER_BINDING(f, ops::install);\n")
    assert check_cpp_text(registered, "kernels/f_binding.cpp") == []
