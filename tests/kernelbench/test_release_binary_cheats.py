"""The binary audit on real CUDA-Agent release bindings (``torch/extension.h``, real pybind11 and torch headers).

One honest release-style binding whose pybind11 machinery the compiler instantiates passes the binary rules;
one binding TU holding the cheats only the binary layer sees in that convention (a call into Python routed
through pybind11, ``py::module_::import("torch").attr("matmul")``, from a registered function and from a lambda
that the compiler inlines into pybind11's dispatcher; tensor operators; a dispatcher lookup) is refused by the
binary layer alone with each rule id of today's corpus. Each build parses torch/extension.h (30-120 s here).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness.build import build_extension, default_cache_dir
from cuda_agent.harness.integrity import check_binary
from cuda_agent.harness.layout import write_layout
from cuda_agent.schemas.task import TaskManifest

from .conftest import DATA, SOLUTIONS

TASK = TaskManifest.from_code("kernelbench/level1/1_Square_matrix_multiplication_",
                              (DATA / "KernelBench" / "level1" / "1_Square_matrix_multiplication_.py").read_text())

CHEAT_BINDING = """// Release-style binding whose functions compute through Python and ATen.
#include <torch/extension.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include "../binding_registry.h"

torch::Tensor mm_python(torch::Tensor a, torch::Tensor b) {
  return py::module_::import("torch").attr("matmul")(a, b).cast<torch::Tensor>();
}

torch::Tensor mm_operator(torch::Tensor a, torch::Tensor b) { return a * b + a; }

torch::Tensor mm_dispatcher(const torch::Tensor& a, const torch::Tensor& b) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::mm", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(a, b);
}

void register_mm(pybind11::module& m) {
  m.def("mm_python", &mm_python);
  m.def("mm_operator", &mm_operator);
  m.def("mm_dispatcher", &mm_dispatcher);
  m.def("mm_lambda", [](torch::Tensor a, torch::Tensor b) {
    return py::module_::import("numpy").attr("dot")(a, b).cast<torch::Tensor>();
  });
}

REGISTER_BINDING(mm, register_mm);
"""


def _build(tmp_path: Path, kind: str, files: dict[str, str]) -> Path:
    root = tmp_path / "ws"
    write_layout(root, TASK, kind)  # type: ignore[arg-type]
    for rel, text in files.items():
        (root / rel).write_text(text)
    outcome = build_extension(root, kind, tmp_path / "build", cache_dir=default_cache_dir(), timeout_s=1800)
    assert outcome.ok and outcome.so_path is not None, outcome.log
    return outcome.so_path


def _honest_release(kind: str) -> dict[str, str]:
    folder = SOLUTIONS / "release" / kind / "1_Square_matrix_multiplication_" / "kernels"
    return {f"kernels/{p.name}": p.read_text() for p in folder.iterdir()}


def _cheat_checks(so: Path, kind: str) -> None:
    violations = check_binary(so, kind)
    rules = {v.rule for v in violations}
    assert {"T1.binary.python_api", "T1.binary.aten_op", "T1.binary.dispatcher"} <= rules, violations
    python = [v.message for v in violations if v.rule == "T1.binary.python_api"]
    # Each call into Python is charged to the candidate's own function holding it.
    assert any("mm_python(at::Tensor, at::Tensor)" in m for m in python), python
    assert any("register_mm(pybind11::module_&)::{lambda" in m for m in python), python


@pytest.mark.slow
def test_release_binding_cheats_are_refused_on_cpu(tmp_path: Path) -> None:
    # The honest release binding passing the binary audit on CPU: every build runs it, and
    # tests/kernelbench/test_conventions.py grades the honest release solutions correct (one torch/extension.h
    # compile fewer here: 40-60 s on 2 cores). The CUDA test below builds both.
    cheat_files = {**_honest_release("cpu"), "kernels/mm_binding.cpp": CHEAT_BINDING}
    _cheat_checks(_build(tmp_path / "cheat", "cpu", cheat_files), "cpu")


@pytest.mark.gpu
def test_release_binding_machinery_passes_and_its_cheats_are_refused_on_cuda(tmp_path: Path) -> None:
    # On the H200 image's gcc an honest release binding imported PyObject_CallObject (issue 21).
    honest = _build(tmp_path / "honest", "cuda", _honest_release("cuda"))
    assert check_binary(honest, "cuda") == []
    cheat_files = {**_honest_release("cuda"), "kernels/mm_binding.cpp": CHEAT_BINDING}
    _cheat_checks(_build(tmp_path / "cheat", "cuda", cheat_files), "cuda")
