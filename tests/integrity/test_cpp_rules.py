"""C++/CUDA source rules: every cheat rejected by its rule (raw or after macro expansion), honest code accepted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cuda_agent.harness.integrity import RULES, check_cpp_text, check_sources


def test_cheat_is_rejected_by_its_rule(cpp_cheat: Path, expectations: Callable[[Path], str]) -> None:
    rule = expectations(cpp_cheat)
    assert rule in RULES
    violations = check_cpp_text(cpp_cheat.read_text(), f"kernels/{cpp_cheat.name}")
    assert rule in [v.rule for v in violations], f"{cpp_cheat.name}: expected {rule}, got {violations}"
    hit = next(v for v in violations if v.rule == rule)
    assert hit.file == f"kernels/{cpp_cheat.name}" and hit.line is not None


def test_honest_source_is_accepted(cpp_honest: Path) -> None:
    violations = check_cpp_text(cpp_honest.read_text(), f"kernels/{cpp_honest.name}")
    assert violations == [], "\n".join(str(v) for v in violations)


def test_comments_and_strings_are_not_code() -> None:
    src = ('// at::matmul(a, b); cudaStreamCreate(&s); std::thread t;\n'
           '/* dlopen("libtorch_cpu.so") \n PyImport_ImportModule("torch") */\n'
           'const char* msg = "use at::matmul or torch::relu? no: write the kernel";\n'
           'const char* raw = R"x(at::mm(a, b) "quoted" )x";\n')
    assert check_cpp_text(src, "kernels/k.cpp") == []


def test_token_pasting_is_seen_after_expansion_only() -> None:
    src = "#define J(x, y) x##y\nvoid* f(void* a) {\n  return J(dl, open)(\"x\", 2);\n}\n"
    (v,) = [v for v in check_cpp_text(src, "kernels/k.cpp") if v.rule == "T1.cpp.dynamic_loading"]
    assert v.line == 3 and "after macro expansion" in v.message


def test_macro_from_a_workspace_header_expands_in_the_kernel(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "ops.cuh").write_text("#pragma once\n#define PASTE(a, b) a##b\n")
    (tmp_path / "kernels" / "k_binding.cpp").write_text(
        '#include "ops.cuh"\nvoid* g(void* s) {\n  PASTE(cudaStream, Create)(&s);\n  return s;\n}\n')
    (tmp_path / "model_new.py").write_text(
        "import torch\nimport cuda_extension\n\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return cuda_extension.g(x)\n")
    violations = check_sources(tmp_path, "cuda")
    assert [(v.rule, v.file, v.line) for v in violations] == [("T9.cpp.stream", "kernels/k_binding.cpp", 3)]


def test_broken_macros_fail_closed() -> None:
    src = "#define BAD(x x\nvoid f() {}\n"
    assert [v.rule for v in check_cpp_text(src, "kernels/k.cpp")] == ["T1.cpp.unparseable_macros"]


def test_vendor_library_is_a_setting() -> None:
    src = "#include <cublas_v2.h>\nvoid g(cublasHandle_t h) { cublasSgemm(h, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1); }\n"
    assert {v.rule for v in check_cpp_text(src, "kernels/g.cu")} == {"T1.cpp.vendor_library"}
    assert check_cpp_text(src, "kernels/g.cu", allowed_libraries=["cublas"]) == []


def test_protected_binding_files_are_not_checked(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "binding.cpp").write_text("#include <torch/extension.h>\nPYBIND11_MODULE(m, x) { py::object o; }\n")
    (tmp_path / "binding_registry.h").write_text("#include <torch/extension.h>\n")
    (tmp_path / "model_new.py").write_text(
        "import torch\nimport cuda_extension\n\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return cuda_extension.g(x)\n")
    assert check_sources(tmp_path, "cpu") == []


def test_extra_python_modules_and_prebuilt_binaries_are_refused(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "model_new.py").write_text(
        "import torch\nimport cuda_extension\n\n\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        return cuda_extension.g(x)\n")
    (tmp_path / "model.py").write_text("# the task's reference (protected)\n")
    (tmp_path / "cuda_extension.py").write_text("import torch\ndef g(x):\n    return torch.relu(x)\n")
    (tmp_path / "kernels" / "prebuilt.so").write_bytes(b"\x7fELF")
    found = {(v.rule, v.file) for v in check_sources(tmp_path, "cpu")}
    assert found == {("T1.python.import_not_allowed", "cuda_extension.py"),
                     ("T1.python.native_access", "kernels/prebuilt.so")}


def test_kind_is_validated(tmp_path: Path) -> None:
    import pytest

    with pytest.raises(ValueError, match="valid kinds: cpu, cuda"):
        check_sources(tmp_path, "rocm")


def test_our_own_registry_header_passes_the_rules() -> None:
    # Written by the harness and protected; it must still read as honest code (a release-style check of it).
    from cuda_agent.harness._binding_sources import BINDING_REGISTRY_H

    assert check_cpp_text(BINDING_REGISTRY_H, "binding_registry.h") == []
