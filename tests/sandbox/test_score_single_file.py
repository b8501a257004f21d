"""KernelBench single-file solutions (``load_inline``) get the static integrity layer in ``cuda-agent score``.

The inline C++ sources are checked by the C++ rules, ``ModelNew.forward`` by
the Python allowlist; sources built at run time are named in the message and
the runtime checks still grade the file (real build with load_inline, real
sandboxed runner).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.harness.single_file_integrity import check_single_file

REPO = Path(__file__).resolve().parents[2]

HONEST = '''"""Swish with an inline C++ kernel (KernelBench single-file style)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
#include <torch/extension.h>

torch::Tensor swish_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* src = xc.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        float v = src[i];
        dst[i] = v / (1.0f + std::exp(-v));
    }
    return out;
}
"""

swish_ext = load_inline(
    name="swish_inline_SUFFIX",
    cpp_sources=cpp_source,
    functions=["swish_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = swish_ext

    def forward(self, x):
        return self.ext.swish_forward(x)
'''

#: The C++ source calls ATen to do the work (THREATS class 1).
CPP_CHEAT = HONEST.replace("auto out = torch::empty_like(xc);", "return at::sigmoid(xc) * xc;\n    auto out = torch::empty_like(xc);")
#: forward falls back to PyTorch for small inputs (class 2 / 1).
FORWARD_CHEAT = HONEST.replace(
    "return self.ext.swish_forward(x)", "return self.ext.swish_forward(x) if x.numel() > 4096 else x * torch.sigmoid(x)"
)
#: The source is assembled at run time: not statically recoverable (honest otherwise).
DYNAMIC = HONEST.replace("cpp_sources=cpp_source,", 'cpp_sources=cpp_source.replace("__EXP__", "exp"),').replace(
    "std::exp(-v)", "std::__EXP__(-v)"
)


def test_honest_single_file_passes_the_static_layer() -> None:
    check = check_single_file(HONEST, "swish.py")
    assert check.violations == [] and check.notes == [] and check.load_calls == 1
    assert len(check.sources) == 1 and "swish_forward" in check.sources[0].text


def test_cpp_rules_run_over_inline_sources() -> None:
    check = check_single_file(CPP_CHEAT, "swish.py")
    cpp = [v for v in check.violations if v.rule == "T1.cpp.aten_call"]
    assert cpp and "cpp_sources of load_inline" in (cpp[0].file or "")


def test_sources_in_lists_constants_concatenation_and_cuda_sources_are_recovered() -> None:
    src = HONEST.replace("cpp_sources=cpp_source,", 'cpp_sources=["// decl\\n", HEAD + cpp_source],\n    cuda_sources=CUDA,')
    src = src.replace("swish_ext = load_inline(", 'HEAD = "// head\\n"\nCUDA = "__global__ void k(float* p) { cudaStreamCreate(0); }"\nswish_ext = load_inline(')
    check = check_single_file(src, "swish.py")
    assert [s.text.split("\n")[0] for s in check.sources] == ["// decl", "// head", "__global__ void k(float* p) { cudaStreamCreate(0); }"]
    assert any(v.rule.startswith("T9.") and "cuda_sources" in (v.file or "") for v in check.violations), check.violations


def test_forward_allowlist_applies_and_names_the_rule() -> None:
    rules = {v.rule for v in check_single_file(FORWARD_CHEAT, "swish.py").violations}
    assert "T2.python.guarded_fallback" in rules
    unused = HONEST.replace("return self.ext.swish_forward(x)", "return x * torch.sigmoid(x)")
    rules = {v.rule for v in check_single_file(unused, "swish.py").violations}
    assert {"T1.python.torch_call", "T1.python.extension_unused"} <= rules
    # The extension stored on self only counts when every assignment stores it.
    rebound = HONEST.replace("self.ext = swish_ext", "self.ext = swish_ext\n        if True:\n            self.ext = torch")
    assert check_single_file(rebound, "swish.py").violations


def test_runtime_built_sources_are_reported_not_rejected() -> None:
    check = check_single_file(DYNAMIC, "swish.py")
    assert check.violations == []
    assert len(check.notes) == 1 and "not statically recoverable" in check.notes[0] and "line" in check.notes[0]


@pytest.mark.slow
def test_score_applies_static_rules_to_single_files(tmp_path: Path, run_score) -> None:  # type: ignore[no-untyped-def]
    solutions, tasks, out = tmp_path / "solutions", tmp_path / "tasks", tmp_path / "out"
    solutions.mkdir()
    tasks.mkdir()
    files = {"cpp_cheat": CPP_CHEAT, "forward_cheat": FORWARD_CHEAT, "dynamic": DYNAMIC}
    for name, text in files.items():
        shutil.copy(REPO / "examples" / "tasks" / "swish.py", tasks / f"{name}.py")
        (solutions / f"{name}.py").write_text(text.replace("SUFFIX", f"{name}_{tmp_path.name}"))
    rows = {r["task"]: r for r in run_score(solutions, tasks, out)["tasks"]}
    assert rows["cpp_cheat"]["status"] == "rejected" and rows["cpp_cheat"]["rule"] == "T1.cpp.aten_call"
    assert rows["forward_cheat"]["status"] == "rejected" and rows["forward_cheat"]["rule"].startswith("T2.")
    assert "T2." in rows["forward_cheat"]["message"]
    dyn = rows["dynamic"]
    assert dyn["status"] == "correct", dyn["message"]
    assert "not statically recoverable" in dyn["message"] and "single_file_sources_not_static" in dyn["flags"]
