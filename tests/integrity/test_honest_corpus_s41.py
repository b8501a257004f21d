"""Session 41's honest corpus: kernels written the way LLMs, the CUDA-Agent release and KernelBench's own solutions write
them, in the three conventions (``REGISTER_BINDING``, release ``register_x(pybind11::module&)``, single-file
``load_inline``), all passing every static rule through the entry points grading uses (``check_sources`` for a
workspace, ``check_single_file`` for a single file).

- ``honest/cpp/h_s41_*``: one workspace per fixture (``<stem>.cu`` and its ``<stem>_binding.cpp`` together), checked
  with ``check_sources`` for its backend (``cuda`` when it has a ``.cu``); ``honest/cpp/allowed_cublas/`` is honest
  where the skill allows cuBLAS, and refused where it does not.
- ``honest/single_file/h_s41_*``: ``check_single_file``, every source recovered.
- End to end on the CPU backend (slow): the small CPU fixtures that solve a vendored KernelBench problem are scored
  at reduced sizes (real compiler, real torch) and must grade correct.
- The CUDA fixtures compiled with ``nvcc -c`` (slow): this machine's CUDA 13 toolkit has no cuBLAS, cuSPARSE or
  cuSOLVER headers, which ``ATen/cuda/CUDAContext.h`` includes, nor torch's generated ``cuda_cmake_macros.h`` (a CPU
  wheel); the test writes stand-ins declaring only the handle and status types those headers need, so what is
  compiled is the fixture against the real torch and CUDA headers. No GPU runs anything.

False rejections this corpus found (each fixed in session 41, with a cheat beside the fix in ``cheats/cpp/*_s41_*``):
``at::internal::GRAIN_SIZE``, ``at::parallel_reduce``, ``at::get_thread_num``, ``at::numeric_limits``
(``T1.cpp.aten_call``); ``at::cuda::getCurrentCUDABlasHandle()`` refused even with cuBLAS allowed
(``T1.cpp.vendor_library``); a multi-line ``#define`` declaring a kernel's locals, whose continuation lines were judged
as globals, and ``static const std::array<float, 4> k = {literals}`` (``T12.cpp.static_cache``);
``REGISTER_BINDING_DOC(name, register_x, "doc")`` and ``REGISTER_BINDING(name, &register_x)`` (``T1.cpp.module_handle``);
``w.add(v)``/``w.mean()`` on the candidate's own Welford struct (``T1.cpp.aten_method``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_cpp_text, check_sources
from cuda_agent.harness.single_file_integrity import check_single_file
from tests.integrity.conftest import CHEATS, HONEST, score_one

CPP = HONEST / "cpp"
FIXTURES = sorted(p for p in CPP.glob("h_s41_*") if p.suffix in {".cpp", ".cu"})
CUBLAS = sorted((CPP / "allowed_cublas").glob("h_s41_*"))
SINGLE_FILES = sorted((HONEST / "single_file").glob("h_s41_*.py"))
KB_REDUCED = "kernelbench:" + str(Path(__file__).resolve().parents[1] / "kernelbench" / "data") + "?sizes=reduced"
MODEL_NEW = ("import torch\nimport torch.nn as nn\n\nimport cuda_extension as ext\n\n\nclass ModelNew(nn.Module):\n"
             "    def forward(self, {args}):\n        return ext.{fn}({args})\n")


def _groups(files: list[Path]) -> dict[str, list[Path]]:
    """Fixtures by workspace: ``x.cu`` with ``x_binding.cpp``; a lone file is a workspace of its own."""
    out: dict[str, list[Path]] = {}
    for p in files:
        out.setdefault(p.stem.removesuffix("_binding"), []).append(p)
    return out


GROUPS = _groups(FIXTURES)


def _workspace(root: Path, files: list[Path], model_new: str) -> Path:
    (root / "kernels").mkdir(parents=True)
    for p in files:
        (root / "kernels" / p.name).write_text(p.read_text())
    (root / "model_new.py").write_text(model_new)
    return root


def test_the_corpus_covers_every_convention_and_backend() -> None:
    names = [p.name for p in FIXTURES + CUBLAS + SINGLE_FILES]
    assert len(names) >= 30, len(names)
    for part in ("_reg_cpu_", "_reg_cuda_", "_rel_cpu_", "_rel_cuda_", "_sf_cpu_", "_sf_cuda_"):
        assert any(part in n for n in names), part


@pytest.mark.parametrize("stem", sorted(GROUPS))
def test_honest_workspace_passes_every_static_rule(stem: str, tmp_path: Path) -> None:
    files = GROUPS[stem]
    kind = "cuda" if any(p.suffix == ".cu" for p in files) else "cpu"
    ws = _workspace(tmp_path / "ws", files, MODEL_NEW.format(fn="forward", args="x"))
    violations = check_sources(ws, kind)
    assert violations == [], "\n".join(str(v) for v in violations)


def test_cublas_through_the_torch_handle_passes_where_cublas_is_allowed(tmp_path: Path) -> None:
    (gemm,) = CUBLAS
    ws = _workspace(tmp_path / "ws", [gemm], MODEL_NEW.format(fn="linear_relu_forward", args="x"))
    assert check_sources(ws, "cuda", allowed_libraries=("cublas",)) == []
    # Before session 41 the handle was T1.cpp.vendor_library even with cuBLAS allowed; without it, still refused.
    assert {v.rule for v in check_sources(ws, "cuda")} == {"T1.cpp.vendor_library"}
    sparse = CHEATS / "cpp" / "t1_s41_sparse_handle_beside_cublas.cu"
    found = check_cpp_text(sparse.read_text(), "kernels/k.cu", allowed_libraries=("cublas",))
    assert [(v.rule, "Sparse" in v.message) for v in found] == [("T1.cpp.vendor_library", True)]


@pytest.mark.parametrize("path", SINGLE_FILES, ids=[p.name for p in SINGLE_FILES])
def test_honest_single_file_passes_every_static_rule(path: Path) -> None:
    check = check_single_file(path.read_text(), "level_1_problem_19_sample_0_kernel.py")
    assert check.violations == [], "\n".join(str(v) for v in check.violations)
    assert check.sources and not check.notes


def test_a_macro_declares_locals_but_not_globals() -> None:
    honest = "#define PROLOGUE \\\n  const int tid = threadIdx.x; \\\n  int idx = blockIdx.x * 4 + tid;\n" \
             "__global__ void k(float* y) {\n  PROLOGUE\n  y[idx] = 0.f;\n}\n"
    assert check_cpp_text(honest, "kernels/k.cu") == []
    cheat = "#define STATE \\\n  int calls = 0;\nSTATE\nint f() { return ++calls; }\n"
    (v,) = check_cpp_text(cheat, "kernels/k.cpp")
    assert (v.rule, v.line, "after macro expansion" in v.message) == ("T12.cpp.static_cache", 3, True)


# --------------------------------------------------------------------------- end to end on the CPU backend
#: CPU fixtures that solve a vendored KernelBench problem: fixture -> (problem, entry point, forward's arguments).
E2E = {
    "h_s41_reg_cpu_omp_relu": ("19_ReLU", "relu_forward", "x"),
    "h_s41_reg_cpu_vectorized_map": ("19_ReLU", "relu_forward", "x"),
    "h_s41_reg_cpu_parallel_for_softmax": ("23_Softmax", "softmax_forward", "x"),
    "h_s41_reg_cpu_tiled_matmul": ("1_Square_matrix_multiplication_", "matmul_forward", "A, B"),
    "h_s41_rel_cpu_relu_binding": ("19_ReLU", "relu_forward", "x"),
}


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(E2E))
def test_honest_cpu_fixture_grades_correct(stem: str, tmp_path: Path) -> None:
    problem, fn, args = E2E[stem]
    (src,) = GROUPS[stem.removesuffix("_binding")]
    files = {"model_new.py": MODEL_NEW.format(fn=fn, args=args), f"kernels/{src.name}": src.read_text()}
    row = score_one(tmp_path, problem, files, tasks=KB_REDUCED)
    assert row["status"] == "correct", (row["status"], row.get("rule"), row["message"][:800])


# --------------------------------------------------------------------------- nvcc -c against the torch headers
#: Stand-ins for the vendor headers ATen/cuda/CUDAContext.h includes (absent from this toolkit): types only.
STUBS = {
    "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t;\ntypedef enum { CUSPARSE_STATUS_SUCCESS = 0 } "
                  "cusparseStatus_t;\nextern \"C\" const char* cusparseGetErrorString(cusparseStatus_t);\n",
    "cublas_v2.h": "#include <cuda_runtime_api.h>\ntypedef struct cublasContext* cublasHandle_t;\ntypedef enum { "
                   "CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;\ntypedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } "
                   "cublasOperation_t;\nextern \"C\" cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t);\n"
                   "#define cublasSetStream cublasSetStream_v2\nextern \"C\" cublasStatus_t cublasSgemm_v2(cublasHandle_t, "
                   "cublasOperation_t, cublasOperation_t, int, int, int, const float*, const float*, int, const float*, "
                   "int, const float*, float*, int);\n#define cublasSgemm cublasSgemm_v2\n",
    "cublasLt.h": "typedef struct cublasLtContext* cublasLtHandle_t;\n",
    "cusolverDn.h": "typedef struct cusolverDnContext* cusolverDnHandle_t;\n",
    "cusolver_common.h": "typedef enum { CUSOLVER_STATUS_SUCCESS = 0, CUSOLVER_STATUS_INVALID_VALUE = 3 } "
                         "cusolverStatus_t;\n",
    "c10/cuda/impl/cuda_cmake_macros.h": "",
}


def _nvcc(src: Path, root: Path) -> subprocess.CompletedProcess[str]:
    import torch
    from torch.utils.cpp_extension import include_paths

    out = root / "out" / (src.stem + ".o")
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = [f"-I{root / 'stubs'}", *(f"-I{p}" for p in include_paths()), f"-I{sysconfig.get_paths()['include']}",
             f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}", "-DTORCH_EXTENSION_NAME=ext"]
    cmd = ["nvcc", "-O0", "-std=c++17", "-arch=sm_90", "-Xcompiler", "-fPIC", "-w", *flags, "-c", str(src), "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cuda_fixtures_compile_with_nvcc(tmp_path: Path) -> None:
    from cuda_agent.harness._binding_sources import BINDING_REGISTRY_H

    for rel, text in STUBS.items():
        (tmp_path / "stubs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "stubs" / rel).write_text("#pragma once\n" + text)
    (tmp_path / "binding_registry.h").write_text(BINDING_REGISTRY_H)
    (tmp_path / "kernels").mkdir()
    sources = []
    for p in [q for q in FIXTURES if q.suffix == ".cu"] + CUBLAS:
        (tmp_path / "kernels" / p.name).write_text(p.read_text())  # their `#include "../binding_registry.h"`
        sources.append(tmp_path / "kernels" / p.name)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(sources, pool.map(lambda s: _nvcc(s, tmp_path), sources), strict=True))
    failed = {s.name: r.stderr[-1500:] for s, r in results.items() if r.returncode != 0}
    assert not failed, failed
    print(f"compiled {len(results)} CUDA fixtures", file=sys.stderr)
