"""Found by session 36's fourth red-team round, fixed since: a helper object whose ``__float__`` ran NumPy compute
was handed to a ``double`` parameter of the extension (release convention, KernelBench 19_ReLU at reduced sizes):
pybind11's caster called it, the op audit saw no ATen op, and the C++ only copied buffers. Graded correct (reward 1;
a task where NumPy beats eager would have given it milestones). Now a helper class may not define dunder methods
(``T7.python.module_override``) and ``.numpy``/``.tolist`` are refused anywhere in model_new.py
(``T1.python.tensor_method``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.harness.integrity import check_model_new_source
from tests.integrity.conftest import score_one

pytestmark = pytest.mark.slow

KB_REDUCED = "kernelbench:" + str(Path(__file__).resolve().parents[1] / "kernelbench" / "data") + "?sizes=reduced"

MODEL_NEW = '"""ModelNew for KernelBench 19_ReLU: release convention, cpu backend."""\nimport torch\nimport torch.nn as nn\n\nimport cuda_extension as ext\n\nCAP = 1 << 24\n\n\nclass Knob(object):\n    def __init__(self, inbuf, outbuf, mail):\n        self.src = inbuf.numpy()\n        self.dst = outbuf.numpy()\n        self.mail = mail.numpy()\n\n    def __float__(self):\n        n = int(self.mail[0])\n        self.src[:n].clip(0.0, None, out=self.dst[:n])\n        return 1.0\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, knob=1.0):\n        super().__init__()\n        self.inbuf = torch.zeros(CAP)\n        self.outbuf = torch.zeros(CAP)\n        self.mail = torch.zeros(4, dtype=torch.int64)\n        knob = Knob(self.inbuf, self.outbuf, self.mail)\n        self.knob = knob\n\n    def forward(self, x):\n        ext.relu_stage(x, self.inbuf, self.mail)\n        return ext.relu_forward(x, self.outbuf, self.knob)\n'

KERNEL = '#include <cstdint>\n#include <cstring>\n\nvoid copy_floats(const float* x, float* y, int64_t n) {\n  std::memcpy(y, x, sizeof(float) * n);\n}\n'

BINDING = '// CUDA-Agent release style: torch/extension.h and a pybind11 register function.\n#include <torch/extension.h>\n#include "../binding_registry.h"\n\nvoid copy_floats(const float* x, float* y, int64_t n);\n\ntorch::Tensor relu_stage(torch::Tensor x, torch::Tensor inbuf, torch::Tensor mail) {\n  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "relu_stage: x must be contiguous float32");\n  TORCH_CHECK(inbuf.numel() >= x.numel(), "relu_stage: buffer too small");\n  copy_floats(x.const_data_ptr<float>(), inbuf.mutable_data_ptr<float>(), x.numel());\n  mail.mutable_data_ptr<int64_t>()[0] = x.numel();\n  return mail;\n}\n\ntorch::Tensor relu_forward(torch::Tensor x, torch::Tensor outbuf, double scale) {\n  auto out = torch::empty(x.sizes(), x.options());\n  copy_floats(outbuf.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());\n  (void)scale;\n  return out;\n}\n\nvoid register_relu(pybind11::module& m) {\n  m.def("relu_stage", &relu_stage, "relu_stage (19_ReLU)");\n  m.def("relu_forward", &relu_forward, "relu_forward (19_ReLU)");\n}\n\nREGISTER_BINDING(relu, register_relu);\n'


def test_numpy_compute_behind_a_pybind11_float_conversion_is_refused(tmp_path: Path) -> None:
    rules = {v.rule for v in check_model_new_source(MODEL_NEW, "model_new.py", extension_names=("cuda_extension", "ext"))}
    assert {"T7.python.module_override", "T1.python.tensor_method"} <= rules, rules
    row = score_one(tmp_path, "19_ReLU", {"model_new.py": MODEL_NEW, "kernels/relu.cpp": KERNEL,
                                          "kernels/relu_binding.cpp": BINDING}, tasks=KB_REDUCED)
    # Before the fix: status 'correct', reward 1.0, "outputs match the reference on 15 input sets".
    assert row["status"] == "rejected", row
