"""Session 42's honest corpus: 40 sources in idioms session 41's did not cover (``test_honest_corpus_s41.py`` says how
the three conventions are checked), through the entry points grading uses: ``check_sources`` per workspace,
``check_single_file`` per single file.

- ``honest/cpp/h_s42_*``: one workspace per fixture (``<stem>.cu`` with its ``<stem>_binding.cpp``, or one file);
  ``honest/single_file/h_s42_*``: one KernelBench ``load_inline`` file each.
- End to end on the CPU backend (slow): the CPU fixtures that solve a vendored KernelBench problem (19_ReLU,
  23_Softmax, 1_Square_matrix_multiplication_, level-2 12_Gemm_Multiply_LeakyReLU) grade correct at reduced sizes.
- Compiled (slow): every CUDA source (the workspaces' ``.cu`` files and the single files' ``cuda_sources``) with
  ``nvcc -c`` against the torch headers and session 41's stand-in vendor headers; every C++ source (CPU
  workspaces, CUDA workspaces' bindings, CPU single files) with ``g++ -fsyntax-only``. No GPU runs anything.

False rejections this corpus found, each narrowed with a cheat beside the fix (``cheats/cpp/*_s42_*``,
``cheats/single_file/*_s42_*``), all asserted here:

- ``T12.cpp.static_cache``: a default argument on the closing line of a prototype over several lines
  (``int64_t stride = 1, int64_t padding = 0);``) was a namespace-scope variable; a line that closes a parenthesis
  opened earlier is no longer judged as a declaration.
- ``T1.cpp.aten_call``: ``at::device_of(x)`` (PyTorch's ``OptionalCUDAGuard device_guard(at::device_of(x))``),
  ``at::maybe_wrap_dim`` and ATen/TensorUtils.h's checks (``at::checkSize``, ``at::checkAllContiguous``,
  ``at::checkDeviceType``, ``at::checkSameType`` ...) are allowed.
- ``T16.cpp.thread_count``: ``dim3 num_threads(16, 16)`` (a launch's block shape) is not the OpenMP clause, except on
  a ``#pragma`` line (``#define dim3`` would make it one); found beside it and closed: the clause in a
  ``_Pragma("omp ... num_threads(n)")`` string passed.
- ``T12.cpp.static_cache``: ``TORCH_CHECK(out.data_ptr() != x.data_ptr())`` and ``x.data_ptr() != nullptr`` (an
  aliasing and a definedness check), and a lambda's init-capture of a data pointer (``[src =
  x.const_data_ptr<float>()](int64_t b, int64_t e)``), were cache checks; a saved address, a static lambda and a
  subscript keyed by an address stay refused.
- ``T1.cpp.vendor_library`` (single files): a BLAS-like name given to the candidate's own function,
  ``m.def("sgemm", &own)`` or ``AT_DISPATCH_FLOATING_TYPES(t, "sgemm", ...)``, was a vendor BLAS use; those two
  literals no longer count (unless the sources define a macro of those names), asm labels still do.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_cpp_text, check_sources
from cuda_agent.harness.integrity.cpp_rules import external_blas
from cuda_agent.harness.single_file_integrity import check_single_file
from tests.integrity.conftest import CHEATS, HONEST, expected_rule, score_one
from tests.integrity.test_honest_corpus_s41 import KB_REDUCED, MODEL_NEW, STUBS, _groups, _nvcc, _workspace

CPP = HONEST / "cpp"
FIXTURES = sorted(p for p in CPP.glob("h_s42_*") if p.suffix in {".cpp", ".cu"})
SINGLE_FILES = sorted((HONEST / "single_file").glob("h_s42_*.py"))
GROUPS = _groups(FIXTURES)
CHEAT_SOURCES = sorted((CHEATS / "cpp").glob("*_s42_*")) + sorted((CHEATS / "single_file").glob("*_s42_*.py"))
MODEL_GEMM = ("import torch\nimport torch.nn as nn\n\nimport cuda_extension as ext\n\n\nclass ModelNew(nn.Module):\n"
              "    def __init__(self, in_features, out_features, multiplier, negative_slope):\n"
              "        super().__init__()\n        self.gemm = nn.Linear(in_features, out_features)\n"
              "        self.multiplier = multiplier\n        self.negative_slope = negative_slope\n\n"
              "    def forward(self, x):\n"
              "        return ext.{fn}(x, self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope)\n")


def test_the_corpus_covers_every_convention_and_backend() -> None:
    names = [p.name for p in FIXTURES + SINGLE_FILES]
    assert 30 <= len(names) <= 40, len(names)
    for part in ("_reg_cpu_", "_reg_cuda_", "_rel_cpu_", "_rel_cuda_", "_sf_cpu_", "_sf_cuda_"):
        assert sum(part in n for n in names) >= 4, part


@pytest.mark.parametrize("stem", sorted(GROUPS))
def test_honest_workspace_passes_every_static_rule(stem: str, tmp_path: Path) -> None:
    files = GROUPS[stem]
    kind = "cuda" if any(p.suffix == ".cu" for p in files) else "cpu"
    ws = _workspace(tmp_path / "ws", files, MODEL_NEW.format(fn="forward", args="x"))
    violations = check_sources(ws, kind)
    assert violations == [], "\n".join(str(v) for v in violations)


@pytest.mark.parametrize("path", SINGLE_FILES, ids=[p.name for p in SINGLE_FILES])
def test_honest_single_file_passes_every_static_rule(path: Path) -> None:
    check = check_single_file(path.read_text(), "level_1_problem_19_sample_0_kernel.py")
    assert check.violations == [], "\n".join(str(v) for v in check.violations)
    assert check.sources and not check.notes


@pytest.mark.parametrize("path", CHEAT_SOURCES, ids=[p.name for p in CHEAT_SOURCES])
def test_the_cheat_beside_each_fix_is_refused(path: Path) -> None:
    if path.suffix == ".py":
        found = check_single_file(path.read_text(), path.name).violations
    else:
        found = check_cpp_text(path.read_text(), f"kernels/{path.name}")
    assert expected_rule(path) in [v.rule for v in found], (path.name, found)


def _rules(code: str) -> list[str]:
    return [v.rule for v in check_cpp_text(code, "kernels/k.cu")]


def test_a_default_argument_closing_a_prototype_is_no_global() -> None:
    assert _rules("void launch(const float* x, float* y,\n            const float* bias = nullptr);\n") == []
    assert _rules("at::Tensor f(at::Tensor x,\n    c10::optional<at::Tensor> b = c10::nullopt);\n") == []
    assert _rules("void f(int a,\n       int b = 0); int calls = 0;\n") == ["T12.cpp.static_cache"]
    assert _rules("int calls = 0;\nvoid f(int a,\n       int b = 0);\n") == ["T12.cpp.static_cache"]


def test_dim3_named_num_threads_is_a_block_shape_not_the_openmp_clause() -> None:
    assert _rules("void f() { dim3 num_threads(16, 16); }\nvoid g() { const dim3  num_threads(8); }\n") == []
    assert _rules("void f(float* y) {\n#pragma omp parallel for num_threads(4)\n"
                  "  for (int i = 0; i < 4; ++i) y[i] = 0; }\n") == ["T16.cpp.thread_count"]
    assert _rules('void f(float* y) {\n  _Pragma("omp parallel for num_threads(4)")\n  for (int i = 0; i < 4; ++i) '
                  "y[i] = 0; }\n") == ["T16.cpp.thread_count"]


def test_data_pointers_compared_within_a_call_are_no_cache_check() -> None:
    assert _rules("void f(const at::Tensor& x, const at::Tensor& y) { TORCH_CHECK(y.data_ptr() != x.data_ptr()); "
                  "TORCH_CHECK(x.data_ptr<float>() != nullptr); TORCH_CHECK(NULL != y->data_ptr()); }\n") == []
    for refused in ("x.data_ptr() == last", "last == x.data_ptr()", "x.data_ptr() == (void*)y.data_ptr()",
                    "y.data_ptr() != x.data_ptr() || x.data_ptr() == saved"):
        code = f"bool f(const at::Tensor& x, const at::Tensor& y, void* last, void* saved) {{ return {refused}; }}\n"
        assert _rules(code) == ["T12.cpp.static_cache"], refused


def test_a_lambda_capturing_a_data_pointer_is_no_cache_key() -> None:
    honest = ("void f(const at::Tensor& x, at::Tensor& y) {\n  auto body = [p = x.data_ptr<float>()](int64_t i) { "
              "return p[i]; };\n  at::parallel_for(0, 8, 1, [src = x.data_ptr<float>(), dst = y.data_ptr<float>()]"
              "(int64_t b, int64_t e) { for (int64_t i = b; i < e; ++i) dst[i] = src[i]; });\n}\n")
    assert _rules(honest) == []
    for refused in ("cache[x.data_ptr()]", "obj.cache [x.data_ptr()]", "get()[x.data_ptr()]"):
        assert _rules(f"void g(const at::Tensor& x) {{ use({refused}); }}\n") == ["T12.cpp.static_cache"], refused
    assert _rules("float* g(const at::Tensor& x) { static auto k = [p = x.data_ptr<float>()] { return p; }; "
                  "return k(); }\n") == ["T12.cpp.static_cache"]


def test_a_blas_like_name_given_to_the_candidates_own_function_is_no_vendor_call() -> None:
    own = ('at::Tensor mm(const at::Tensor& a) {\n  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "sgemm", [&] {});\n'
           '  return a;\n}\nPYBIND11_MODULE(ext, m) { m.def("sgemm", &mm, "own kernel"); m.def("dgemm", &mm); }\n')
    assert external_blas(own, "f.py") == []
    label = 'extern "C" void g(const float*) __asm__("sgemm_");\n'
    assert [v.rule for v in external_blas(own + label, "f.py")] == ["T1.cpp.vendor_library"]
    macro = '#define def(name) __asm__(name)\nextern "C" void g(const float*) x.def("sgemm");\n'
    assert [v.rule for v in external_blas(macro, "f.py")] == ["T1.cpp.vendor_library"]


# --------------------------------------------------------------------------- end to end on the CPU backend
#: CPU fixtures that solve a vendored KernelBench problem: workspace stem -> (problem, model_new.py).
E2E = {
    "h_s42_reg_cpu_gemm_leaky_relu": ("12_Gemm_Multiply_LeakyReLU", MODEL_GEMM.format(fn="linear_act_forward")),
    "h_s42_reg_cpu_softmax_anon_ns": ("23_Softmax", MODEL_NEW.format(fn="softmax_forward", args="x")),
    "h_s42_reg_cpu_matmul_packed_b": ("1_Square_matrix_multiplication_", MODEL_NEW.format(fn="matmul_forward",
                                                                                          args="A, B")),
    "h_s42_reg_cpu_relu_capture": ("19_ReLU", MODEL_NEW.format(fn="relu_forward", args="x")),
    "h_s42_rel_cpu_gemm_bias_act": ("12_Gemm_Multiply_LeakyReLU", MODEL_GEMM.format(fn="linear_act_forward")),
    "h_s42_rel_cpu_softmax_reduce_all": ("23_Softmax", MODEL_NEW.format(fn="softmax_forward", args="x")),
    "h_s42_rel_cpu_relu_maybe_owned": ("19_ReLU", MODEL_NEW.format(fn="relu_forward", args="x")),
}
#: Single files that solve one: file -> (problem, the file name KernelBench's runner gives it).
E2E_SINGLE = {
    "h_s42_sf_cpu_gemm_leaky_relu.py": ("12_Gemm_Multiply_LeakyReLU", "level_2_problem_12_sample_0_kernel.py"),
    "h_s42_sf_cpu_matmul_named_sgemm.py": ("1_Square_matrix_multiplication_", "level_1_problem_1_sample_0_kernel.py"),
    "h_s42_sf_cpu_softmax_std_algorithms.py": ("23_Softmax", "level_1_problem_23_sample_0_kernel.py"),
}


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(E2E))
def test_honest_cpu_fixture_grades_correct(stem: str, tmp_path: Path) -> None:
    problem, model_new = E2E[stem]
    files = {"model_new.py": model_new, **{f"kernels/{p.name}": p.read_text() for p in GROUPS[stem]}}
    row = score_one(tmp_path, problem, files, tasks=KB_REDUCED)
    assert row["status"] == "correct", (row["status"], row.get("rule"), row["message"][:800])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(E2E_SINGLE))
def test_honest_cpu_single_file_grades_correct(name: str, tmp_path: Path) -> None:
    problem, as_name = E2E_SINGLE[name]
    row = score_one(tmp_path, problem, {as_name: (HONEST / "single_file" / name).read_text()}, tasks=KB_REDUCED)
    assert row["status"] == "correct", (row["status"], row.get("rule"), row["message"][:800])


# --------------------------------------------------------------------------- compiled: nvcc -c, g++ -fsyntax-only
def _inline_sources(path: Path, param: str) -> list[str]:
    return [s.text for s in check_single_file(path.read_text(), path.name).sources if param in s.label]


def _stage(tmp_path: Path) -> Path:
    """``tmp_path`` with session 41's stand-in vendor headers and the binding header fixtures include."""
    from cuda_agent.harness._binding_sources import BINDING_REGISTRY_H

    for rel, text in STUBS.items():
        (tmp_path / "stubs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "stubs" / rel).write_text("#pragma once\n" + text)
    (tmp_path / "binding_registry.h").write_text(BINDING_REGISTRY_H)
    (tmp_path / "kernels").mkdir()
    return tmp_path


def _compile_all(sources: list[Path], compile_one) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(sources, pool.map(compile_one, sources), strict=True))
    return {s.name: r.stderr[-1500:] for s, r in results.items() if r.returncode != 0}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cuda_sources_compile_with_nvcc(tmp_path: Path) -> None:
    root = _stage(tmp_path)
    sources = []
    for p in FIXTURES:
        if p.suffix == ".cu":
            (root / "kernels" / p.name).write_text(p.read_text())  # their `#include "../binding_registry.h"`
            sources.append(root / "kernels" / p.name)
    for p in SINGLE_FILES:
        for i, text in enumerate(_inline_sources(p, "cuda_sources")):
            (root / "kernels" / f"{p.stem}_{i}.cu").write_text(text)
            sources.append(root / "kernels" / f"{p.stem}_{i}.cu")
    assert len(sources) == 19, [s.name for s in sources]
    failed = _compile_all(sources, lambda s: _nvcc(s, root))
    assert not failed, failed
    print(f"compiled {len(sources)} CUDA sources", file=sys.stderr)


def _cuda_include() -> Path | None:
    """The CUDA toolkit's headers (the CUDA workspaces' bindings include cuda_runtime_api.h)."""
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    return next((Path(h) / "include" for h in homes if h and (Path(h) / "include" / "cuda_runtime_api.h").is_file()),
                None)


def _gxx_syntax(src: Path) -> subprocess.CompletedProcess[str]:
    import torch
    from torch.utils.cpp_extension import include_paths

    flags = [f"-I{src.parents[1] / 'stubs'}", *(f"-I{p}" for p in include_paths()), f"-I{_cuda_include()}",
             f"-I{sysconfig.get_paths()['include']}",
             f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", "-DTORCH_EXTENSION_NAME=ext"]
    cmd = ["g++", "-std=c++17", "-fopenmp", "-fsyntax-only", "-w", *flags, str(src)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None or _cuda_include() is None, reason="no g++ or no CUDA headers")
def test_cpu_sources_compile_with_gxx(tmp_path: Path) -> None:
    root = _stage(tmp_path)
    sources = []
    for p in FIXTURES:  # the CPU workspaces' sources and the CUDA workspaces' bindings
        if p.suffix == ".cpp":
            (root / "kernels" / p.name).write_text(p.read_text())
            sources.append(root / "kernels" / p.name)
    for p in SINGLE_FILES:
        if "_sf_cpu_" in p.name:
            (src,) = _inline_sources(p, "cpp_sources")
            (root / "kernels" / f"{p.stem}.cpp").write_text(src)
            sources.append(root / "kernels" / f"{p.stem}.cpp")
    assert len(sources) == 21, [s.name for s in sources]
    failed = _compile_all(sources, _gxx_syntax)
    assert not failed, failed
