"""Session 36's third red-team round, fixed since: an nn submodule called through ``map`` computed the output on
every call but the first, graded correct. Now a module or function handed to a builtin is a call of it
(``T1.python.submodule_call``), and the op audit also watches one more verification call and one call of every
timed batch at secret positions (``tests/sandbox/test_audit_positions.py`` tests that layer alone).

The two gaps it used, each harmless alone:

1. Static (``harness/integrity/python_calls.py``, layer ``python``): ``self.act(x)`` with ``self.act = nn.SiLU()`` is
   refused (``T1.python.submodule_call``), but handing the same module to the builtin ``map`` is not:
   ``map(self.act, xs)`` passes (``map`` is in ``BUILTINS_ALLOWED`` "with any (non-compute) arguments", and a
   submodule or torch callable passed as its *function* argument is not treated as a call of it; ``filter`` and
   ``max(..., key=...)`` are the same shape). Iterating the map object runs ``SiLU.forward``: ``aten::silu``.
2. Runtime (``harness/session.py`` ``verify_sets``): the op audit runs on one call only, the first verification call
   of the pass (``audit=(j == 0)``), always the candidate's first forward. A static scalar call counter in C++ is
   allowed (docs/integrity.md: "a call counter of that shape is not refused here"), so the candidate can know which
   call is audited.

The fixture's extension has an honest swish kernel and ``swish_pick(x)``, which returns ``[]`` on its first call
and ``[x]`` afterwards. ``forward`` iterates ``map(self.act, cuda_extension.swish_pick(x))``: the first (audited)
call falls through to the honest kernel, every later call returns ``nn.SiLU()(x)``, computed by PyTorch. Seen on
this machine (CPU backend, ``cuda-agent score --only swish``): status 'correct', reward 1, "outputs match the
reference on 15 input sets", no flags; 14 of its 15 calls computed by ATen. (On a task whose eager reference is
several unfused ops, the same route earns speed milestones with a fused torch op: swish's eager is
``x * torch.sigmoid(x)``, three passes; ``silu`` is one.)

What should have caught it: the python allowlist (a submodule/torch callable given to ``map``/``filter``/a ``key=``
is a call of it: ``T1.python.submodule_call``), and behind it the runtime op audit, which should not sit on a call
position the candidate can count (audit every verification call, or calls at secret positions, fresh sets
included).
The control (``map`` on every call) is refused by the audit, as it should be.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrity.conftest import score_one

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "examples" / "tasks"

MODEL_NEW_COUNTED = '''"""Swish."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.SiLU()

    def forward(self, x):
        for y in map(self.act, cuda_extension.swish_pick(x)):
            return y
        out = torch.empty_like(x)
        cuda_extension.swish_forward(x, out)
        return out
'''

MODEL_NEW_ALWAYS = '''"""Swish."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.SiLU()

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.swish_forward(x, out)
        return list(map(self.act, [x]))[0]
'''

KERNEL = r"""
#include <cmath>
#include <cstdint>

void swish_cpu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v / (1.0f + std::exp(-v));
  }
}
"""

BINDING = r"""
#include "../binding_registry.h"

void swish_cpu(const float* x, float* y, int64_t n);

void swish_forward(const at::Tensor& x, const at::Tensor& out) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat, "float32 tensors expected");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
  TORCH_CHECK(x.numel() == out.numel(), "sizes differ");
  swish_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}

REGISTER_BINDING(swish_forward, swish_forward);
"""

PICK_BINDING = r"""
#include "../binding_registry.h"
#include <vector>

std::vector<at::Tensor> swish_pick(const at::Tensor& x) {
  static int64_t calls = 0;
  calls += 1;
  std::vector<at::Tensor> v;
  if (calls > 1) v.push_back(x);
  return v;
}

REGISTER_BINDING(swish_pick, swish_pick);
"""


def _score(tmp_path: Path, model_new: str) -> dict:
    return score_one(tmp_path, "swish", {"model_new.py": model_new, "kernels/swish.cpp": KERNEL,
                                         "kernels/swish_binding.cpp": BINDING, "kernels/pick_binding.cpp": PICK_BINDING})


def test_static_allowlist_refuses_a_submodule_handed_to_map() -> None:
    from cuda_agent.harness.integrity.python_ast import check_model_new_source

    rules = {v.rule for v in check_model_new_source(MODEL_NEW_ALWAYS)}
    assert any(r.startswith("T1.python.") for r in rules), rules


def test_control_map_on_every_call_is_refused_by_the_op_audit(tmp_path: Path) -> None:
    row = _score(tmp_path, MODEL_NEW_ALWAYS)
    assert row["status"] == "rejected", row
    assert (row["rule"] or "").startswith("T1."), row


def test_submodule_through_map_after_the_audited_call_is_not_graded_correct(tmp_path: Path) -> None:
    row = _score(tmp_path, MODEL_NEW_COUNTED)
    assert row["status"] != "correct", row
    assert (row["rule"] or "").startswith("T1."), row
