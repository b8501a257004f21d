"""Session 40, end to end on the CPU backend (``cuda-agent score``, reduced KernelBench sizes, the registry convention:
the project's own ``REGISTER_BINDING`` workspaces, whose bindings compile in seconds).

- **Vectorized methods are not tensor methods.** The softmax of ``tests/integrity/honest/cpp/h_s40_vectorized_softmax.cpp``
  computes with ``at::vec::Vectorized<float>``'s ``.exp()`` and ``.log()``; before session 40 it was rejected as
  ``T1.cpp.aten_method``. It builds, passes every layer (source, binary, runtime op audit) and grades correct.
- **Caches in C++ static storage the source rules allow** (function-scope static arrays and integers: no container, no
  tensor, no pointer variable, no ``data_ptr`` comparison, so ``T12.cpp.static_cache`` does not fire) are graded
  incorrect, each by a run-time check named here:

  ==================================  ============================================  ==================================
  problem                             cache                                         caught by
  ==================================  ============================================  ==================================
  19_ReLU                             outputs in ``static float[]``, keyed by the   a ``dup`` widened set (a few
                                      input's first four elements                   elements replaced: same key, other
                                                                                    data)
  1_Square_matrix_multiplication_     outputs in ``static float[]``, keyed by the   the second verification set: every
                                      inputs' addresses kept as ``uintptr_t``       set is copied into the same staging
                                                                                    buffers, so the key stays, the data
                                                                                    change
  12_Gemm_Multiply_LeakyReLU          no compute when the output lands at the       what the memory holds is NaN (the
                                      address of the previous one (kept as an       runner fills and frees memory of
                                      integer) for the same input address           the output's size before each
                                                                                    call) or the previous set's answer
                                                                                    (the input buffer is reused): which
                                                                                    one depends on the allocator
  ==================================  ============================================  ==================================

  A cache keyed by the whole content is right on every call and is met by the fresh-set timing instead
  (``tests/sandbox/test_content_cache_cheat.py``); ``static std::vector`` caches are refused in source
  (``tests/integrity/cheats/cpp/t12_static_vector_cache.cpp``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_cpp_text

from .conftest import DATA, solution_kit

pytestmark = pytest.mark.slow

REDUCED = f"kernelbench:{DATA}?sizes=reduced"
REPO = Path(__file__).resolve().parents[2]
VECTORIZED_SOFTMAX = REPO / "tests" / "integrity" / "honest" / "cpp" / "h_s40_vectorized_softmax.cpp"

#: The first-elements cache, put at the top of relu_cpu's body.
RELU_CACHE = """
  // T12: the output of the last call, replayed when the input's first four elements match
  static float cached[1 << 24];
  static float key[4];
  static int64_t cached_n = -1;
  if (n == cached_n && std::memcmp(key, x, sizeof key) == 0) {
    std::memcpy(y, cached, sizeof(float) * n);
    return;
  }
  if (n >= 4 && n <= (1 << 24)) {
    relu_cpu_miss(x, y, n);
    std::memcpy(cached, y, sizeof(float) * n);
    std::memcpy(key, x, sizeof key);
    cached_n = n;
    return;
  }
"""
#: The address cache, put at the top of matmul_cpu's body.
MATMUL_CACHE = """
  // T12: the output of the last call, replayed when the inputs are at the same addresses (kept as integers)
  static float cached[1 << 24];
  static uintptr_t key_a = 0, key_b = 0;
  const uintptr_t at_a = reinterpret_cast<uintptr_t>(a), at_b = reinterpret_cast<uintptr_t>(b);
  if (at_a == key_a && at_b == key_b && m * n <= (1 << 24)) {
    std::memcpy(c, cached, sizeof(float) * m * n);
    return;
  }
  if (m * n <= (1 << 24)) {
    matmul_cpu_miss(a, b, c, m, k, n);
    std::memcpy(cached, c, sizeof(float) * m * n);
    key_a = at_a;
    key_b = at_b;
    return;
  }
"""
#: The output-address reuse, put at the top of linear_act_cpu's body.
LINEAR_REUSE = """
  // T4/T12: the output landed where the last one was, for the same input address: what is there is taken as the answer
  static uintptr_t last_y = 0, last_x = 0;
  const uintptr_t at_y = reinterpret_cast<uintptr_t>(y), at_x = reinterpret_cast<uintptr_t>(x);
  if (at_y == last_y && at_x == last_x) return;
  last_y = at_y;
  last_x = at_x;
"""


def _with_cache(kernel: str, signature: str, cache: str) -> str:
    """``kernel`` with its function renamed ``<name>_miss`` and a cached entry point of the old name calling it."""
    name = signature.split("(")[0].split()[-1]
    head = "#include <cstring>\n#include <cstdint>\n"
    miss = kernel.replace(signature, signature.replace(name, f"{name}_miss"))
    assert miss != kernel
    return head + miss + "\n" + signature + cache + f"  {name}_miss({_call_args(signature)});\n}}\n"


def _call_args(signature: str) -> str:
    params = signature[signature.index("(") + 1:signature.rindex(")")]
    return ", ".join(p.split()[-1].lstrip("*") for p in params.replace("\n", " ").split(","))


def cache_problems():  # type: ignore[no-untyped-def]
    kernels, _ = solution_kit()
    by_stem = {p.stem: p for p in kernels.PROBLEMS}
    relu, mm, gemm = (by_stem[s] for s in ("19_ReLU", "1_Square_matrix_multiplication_", "12_Gemm_Multiply_LeakyReLU"))
    relu_sig = "void relu_cpu(const float* x, float* y, int64_t n) {"
    mm_sig = "void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {"
    lin_sig = ("void linear_act_cpu(const float* x, const float* w, const float* bias, float* y, int64_t rows, "
               "int64_t in,\n                    int64_t out, float scale, float slope) {")
    return (dataclasses.replace(relu, cpu_kernel=_with_cache(relu.cpu_kernel, relu_sig, RELU_CACHE)),
            dataclasses.replace(mm, cpu_kernel=_with_cache(mm.cpu_kernel, mm_sig, MATMUL_CACHE)),
            dataclasses.replace(gemm, cpu_kernel=_with_cache(gemm.cpu_kernel, lin_sig, LINEAR_REUSE)))


def _score(problems, tmp_path: Path, score) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    _, conventions = solution_kit()
    folders = conventions.write_all(tmp_path / "solutions", ("registry",), ("cpu",), problems)
    rc, report = score(folders[("registry", "cpu")], REDUCED, "cpu", tmp_path / "out")
    rows = {r["problem"].rsplit("/", 1)[-1]: r for r in report["tasks"]}
    assert set(rows) == {p.stem for p in problems}, report["tasks"]
    return rows


def test_the_static_caches_pass_the_source_rules() -> None:
    # What the run-time checks below are for: nothing static stops these kernels.
    for problem in cache_problems():
        assert check_cpp_text(problem.cpu_kernel, f"kernels/{problem.kernel_name}.cpp") == [], problem.stem


def test_a_vectorized_exp_log_softmax_grades_correct(tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    kernels, _ = solution_kit()
    softmax = next(p for p in kernels.PROBLEMS if p.stem == "23_Softmax")
    vectorized = dataclasses.replace(softmax, cpu_kernel=VECTORIZED_SOFTMAX.read_text())
    assert ".exp()" in vectorized.cpu_kernel and ".log()" in vectorized.cpu_kernel
    row = _score((vectorized,), tmp_path, score)["23_Softmax"]
    # Before session 40: status 'rejected', rule T1.cpp.aten_method.
    assert row["status"] == "correct", (row["status"], row.get("rule"), row["message"][:800])


def test_static_array_caches_are_graded_incorrect(tmp_path: Path, score) -> None:  # type: ignore[no-untyped-def]
    rows = _score(cache_problems(), tmp_path, score)
    summary = {stem: (r["status"], r.get("rule"), r["message"][:300]) for stem, r in rows.items()}
    assert all(r["status"] == "incorrect" for r in rows.values()), summary
    # The first-elements key survives everything but the dup sets: same first elements, other data.
    assert "widened within their domain (dup" in rows["19_ReLU"]["message"], summary["19_ReLU"]
    # The address keys go stale on the second verification set (same staging buffers, other data).
    mm = rows["1_Square_matrix_multiplication_"]["message"]
    assert mm.startswith("outputs differ from the reference on input set(s) [1]:") and "widened" not in mm, mm[:300]
    # Skipping the compute returns what the memory holds: NaN where the runner's poison (memory of the output's size
    # filled with NaN and freed before each call) landed on that block, else the answer of the set called before.
    gemm = rows["12_Gemm_Multiply_LeakyReLU"]["message"]
    assert "NaN never passes" in gemm or "outside atol" in gemm, summary["12_Gemm_Multiply_LeakyReLU"]
