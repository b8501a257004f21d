"""Every cheat of ``tests/integrity/cheats`` rewritten in each public convention is denied with the same rule id.

- ``registry``: the cheat in a workspace whose binding registers with ``REGISTER_BINDING`` (today's corpus form);
- ``release``: the same workspace with a CUDA-Agent release binding (``torch/extension.h`` and
  ``void register_x(pybind11::module& m)``), the C++ cheats written as release binding files;
- ``single_file``: a KernelBench ``load_inline`` file: the Python cheats around a ``load_inline`` extension,
  the C++ cheats as its ``cpp_sources`` (``.cpp``) or ``cuda_sources`` (``.cu``).

Binary-layer cheats (``cheats/binary``, ``torch_binary``) are built and judged per convention in
``test_release_binary_cheats.py``; single files have no binary layer (the runtime audit stands in).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_sources
from cuda_agent.harness.layout import write_layout
from cuda_agent.harness.single_file_integrity import check_single_file
from cuda_agent.schemas.task import TaskManifest

REPO = Path(__file__).resolve().parents[2]
CHEATS = REPO / "tests" / "integrity" / "cheats"
PYTHON_CHEATS = sorted((CHEATS / "python").glob("*.py"))
CPP_CHEATS = sorted(p for p in (CHEATS / "cpp").iterdir() if p.suffix in {".cpp", ".cu"})
#: Cheats whose class has no form in a convention, with the reason (each is covered another way).
NOT_APPLICABLE = {
    ("single_file", "t1_load_inline.py"): "load_inline IS the single-file convention; a second, run-time-built "
                                          "source is reported as not statically recoverable (test_score_single_file)",
}
TASK = TaskManifest.from_code("kernelbench/level1/19_ReLU", (REPO / "tests" / "kernelbench" / "data" / "KernelBench" /
                                                            "level1" / "19_ReLU.py").read_text())
RELEASE_BINDING = """#include <torch/extension.h>
#include "../binding_registry.h"

torch::Tensor noop(torch::Tensor x) { return x; }

void register_noop(pybind11::module& m) { m.def("noop", &noop, "identity"); }

REGISTER_BINDING(noop, register_noop);
"""
REGISTRY_BINDING = """#include "../binding_registry.h"

at::Tensor noop(const at::Tensor& x) { return x; }

REGISTER_BINDING(noop, noop);
"""


def expected(path: Path) -> str:
    return path.read_text().splitlines()[0].split("expect:", 1)[1].strip()


def workspace(tmp_path: Path, convention: str, files: dict[str, str]) -> Path:
    """A cpu workspace with a binding in ``convention`` and the given files."""
    root = tmp_path / "ws"
    write_layout(root, TASK, "cpu")
    binding = RELEASE_BINDING if convention == "release" else REGISTRY_BINDING
    (root / "kernels" / "noop_binding.cpp").write_text(binding)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def as_single_file(model_new: str, cpp: str | None = None, cuda: str | None = None) -> str:
    """A KernelBench single file: ``import cuda_extension`` (or ``import cuda_extension as NAME``) becomes a
    ``load_inline`` extension bound to that name."""
    cpp_text = cpp if cpp is not None else "#include <torch/extension.h>\ntorch::Tensor noop(torch::Tensor x) { return x; }\n"
    sources = f"cpp_source = {cpp_text!r}\n"
    args = 'name="cheat", cpp_sources=cpp_source, functions=["noop"]'
    if cuda is not None:
        sources += f"cuda_source = {cuda!r}\n"
        args += ", cuda_sources=cuda_source"
    found = re.search(r"^import cuda_extension(?: as (\w+))?\n", model_new, re.MULTILINE)
    assert found, "the cheat imports no cuda_extension"
    block = f"from torch.utils.cpp_extension import load_inline\n{sources}{found[1] or 'cuda_extension'} = load_inline({args})\n"
    return model_new[:found.start()] + block + model_new[found.end():]


@pytest.mark.parametrize("convention", ["registry", "release", "single_file"])
@pytest.mark.parametrize("cheat", PYTHON_CHEATS, ids=[p.name for p in PYTHON_CHEATS])
def test_python_cheat_is_denied_in_every_convention(cheat: Path, convention: str, tmp_path: Path) -> None:
    if (convention, cheat.name) in NOT_APPLICABLE:
        pytest.skip(NOT_APPLICABLE[(convention, cheat.name)])
    rule, text = expected(cheat), cheat.read_text()
    if convention == "single_file":
        rules = [v.rule for v in check_single_file(as_single_file(text), "level_1_problem_19_sample_0_kernel.py").violations]
    else:
        rules = [v.rule for v in check_sources(workspace(tmp_path, convention, {"model_new.py": text}), "cpu")]
    assert rule in rules, f"{cheat.name} as {convention}: expected {rule}, got {rules}"


HONEST_MODEL_NEW = """import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.noop(x)
"""


@pytest.mark.parametrize("convention", ["registry", "release", "single_file"])
@pytest.mark.parametrize("cheat", CPP_CHEATS, ids=[p.name for p in CPP_CHEATS])
def test_cpp_cheat_is_denied_in_every_convention(cheat: Path, convention: str, tmp_path: Path) -> None:
    rule, text = expected(cheat), cheat.read_text()
    if convention == "single_file":
        source = "#include <torch/extension.h>\n" + text
        single = as_single_file(HONEST_MODEL_NEW, cpp=source if cheat.suffix == ".cpp" else None,
                                cuda=source if cheat.suffix == ".cu" else None)
        rules = [v.rule for v in check_single_file(single, "level_1_problem_19_sample_0_kernel.py").violations]
    else:
        if convention == "release" and cheat.suffix == ".cpp":
            # A release binding file: torch/extension.h first, the cheat, and a register function for it.
            text = ("#include <torch/extension.h>\n#include \"../binding_registry.h\"\n" + text
                    + "\nvoid register_cheat(pybind11::module& m) {}\nREGISTER_BINDING(cheat, register_cheat);\n")
            name = f"kernels/{cheat.stem}_binding.cpp"
        else:
            name = f"kernels/{cheat.name}"
        rules = [v.rule for v in check_sources(workspace(tmp_path, convention, {"model_new.py": HONEST_MODEL_NEW,
                                                                               name: text}), "cpu")]
    assert rule in rules, f"{cheat.name} as {convention}: expected {rule}, got {rules}"


@pytest.mark.parametrize("convention", ["registry", "release", "single_file"])
def test_the_honest_frames_are_accepted(convention: str, tmp_path: Path) -> None:
    # The frames the cheats are put in are clean: a rule that fires comes from the cheat.
    if convention == "single_file":
        assert check_single_file(as_single_file(HONEST_MODEL_NEW), "x.py").violations == []
    else:
        assert check_sources(workspace(tmp_path, convention, {"model_new.py": HONEST_MODEL_NEW}), "cpu") == []
