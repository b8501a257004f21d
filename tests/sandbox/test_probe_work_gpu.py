"""The CUDA probe measures the forward's temporaries, which the memory planner reserves (issue 21)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

TEMPLATE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        {body}

def get_inputs():
    return [torch.rand(4096, 16384)]

def get_init_inputs():
    return []
'''
MIB = 2**20


# 256 MiB in and out. The second body holds x * 2 and its exp() beside the output at its peak: 2 x 256 MiB (the
# first temporary is freed only after exp() has allocated its own).
@pytest.mark.parametrize(("body", "expected"), [("return torch.relu(x)", 0),
                                                ("y = x * 2\n        return y.exp() + 1", 512 * MIB)])
def test_the_cuda_probe_measures_the_forwards_temporaries(body: str, expected: int) -> None:
    import torch

    from cuda_agent.harness.tasks import manifest_from_facts, run_probe

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    code = TEMPLATE.format(body=body)
    facts = run_probe(code, device="cuda", isolation="process", source="work")
    assert abs(facts["work_bytes"] - expected) <= 8 * MIB, facts["work_bytes"]
    manifest = manifest_from_facts(code, facts, id="work")
    assert manifest.meta["work_bytes"] == facts["work_bytes"]
