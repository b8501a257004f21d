"""Triton fixtures for the classes of cuda-agent's THREATS.md: each a dishonest ``model_new.py`` for the swish task
(or a ReLU task for T18), and the rule or outcome that must stop it.

``STATIC``: rejected by the static rules (``TritonAdapter.check_sources``) with this rule id.
``RUNTIME``: passes the static rules, fails ``verify`` in the sandbox (the shared trusted side) with this status.
``GRADING``: passes ``verify``, fails the grading pass (widened inputs) with this status.
``NOT_APPLICABLE``: classes a Triton file cannot express beyond what the static rules already refuse, and why.
"""

from __future__ import annotations

from pathlib import Path

HONEST = (Path(__file__).resolve().parents[1] / "solutions" / "swish" / "model_new.py").read_text()
LAUNCH = "        swish_kernel[grid](x, out, n, BLOCK=1024)\n"
FORWARD_END = LAUNCH + "        return out\n"


def _forward(body: str) -> str:
    """The honest file with the launch and return replaced by ``body`` (8-space indented lines)."""
    assert FORWARD_END in HONEST
    return HONEST.replace(FORWARD_END, body)


def _kernel(old: str, new: str) -> str:
    assert old in HONEST
    return HONEST.replace(old, new)


#: Classes whose Triton form is refused by the rule of another class: a call counter (13) is state kept in forward
#: (12); shrinking the task (17) starts with importing it (3); writing outside the workspace (23) opens a file (12).
#: Batching across calls (14) needs the same kept state (12).
CAUGHT_BY_RULE_OF = {13: 12, 14: 12, 17: 3, 23: 12}

STATIC: dict[str, tuple[int, str, str]] = {  # name -> (threat class, source, rule id)
    "torch_fallback": (1, _forward(LAUNCH + "        return x * torch.sigmoid(x)\n"), "T1.python.torch_call"),
    "kernel_never_launched": (1, _forward("        out.copy_(x)\n        return out\n"), "T1.python.extension_unused"),
    "torch_by_reflection": (1, _forward(LAUNCH + "        return getattr(torch, 'sig' + 'moid')(x) * x\n"),
                            "T1.python.reflection"),
    "torch_inside_kernel": (1, _kernel("tl.sigmoid(x)", "torch.sigmoid(x)"), "T1.python.torch_call"),
    "triton_runtime_access": (1, _forward("        triton.runtime.driver.active.get_current_device()\n" + FORWARD_END),
                              "T1.python.native_access"),
    "try_except_fallback": (2, _forward("        try:\n    " + LAUNCH + "        except Exception:\n"
                                        "            out = x * torch.sigmoid(x)\n        return out\n"),
                            "T2.python.try_fallback"),
    "inherit_reference": (3, HONEST.replace("class ModelNew(nn.Module):", "from model import Model\n\n\nclass ModelNew(Model):"),
                          "T3.python.import_task"),
    "zero_inputs_in_forward": (5, _forward(LAUNCH + "        x.zero_()\n        return out\n"), "T5.python.input_mutation"),
    "gc_hunt_for_outputs": (6, "import gc\n" + HONEST, "T6.python.introspection"),
    "patch_allclose": (7, _forward("        torch.allclose = lambda *a, **k: True\n" + FORWARD_END), "T7.python.monkeypatch"),
    "triton_do_bench": (8, HONEST.replace("import triton.language as tl", "import triton.language as tl\nimport triton.testing"),
                        "T8.python.timer_access"),
    "patch_timer": (8, "import time\n" + HONEST, "T8.python.timer_access"),
    "side_stream": (9, _forward("        with torch.cuda.stream(torch.cuda.Stream()):\n    " + LAUNCH + "        return out\n"),
                    "T9.python.stream"),
    "background_thread": (10, "import threading\n" + HONEST, "T10.python.thread"),
    "tensor_subclass_output": (11, HONEST + "\n\nclass Lazy(torch.Tensor):\n    pass\n", "T11.python.tensor_subclass"),
    "cache_by_data_ptr": (12, HONEST.replace("        super().__init__()\n", "        super().__init__()\n        self.seen = {}\n", 1)
                          .replace(FORWARD_END, "        key = x.data_ptr()\n        if key in self.seen:\n"
                                   "            return self.seen[key]\n" + LAUNCH + "        self.seen[key] = out\n"
                                   "        return out\n"), "T12.python.state_in_forward"),
    "phase_by_call_count": (13, HONEST.replace("        super().__init__()\n", "        super().__init__()\n        self.calls = 0\n", 1)
                            .replace(FORWARD_END, "        self.calls += 1\n" + FORWARD_END), "T12.python.state_in_forward"),
    "batch_across_calls": (14, HONEST.replace("class ModelNew", "PENDING = []\n\n\nclass ModelNew").replace(
        FORWARD_END, "        PENDING.append(x)\n" + FORWARD_END), "T12.python.state_in_forward"),
    "tf32_dot": (15, (Path(__file__).resolve().parents[1] / "solutions" / "gemm_bias_relu" / "model_new.py").read_text()
                 .replace(', input_precision="ieee"', ""), "T15.python.dtype_cast"),
    "global_tf32_flag": (16, _forward("        torch.backends.cuda.matmul.allow_tf32 = True\n" + FORWARD_END),
                         "T16.python.global_flag"),
    "triton_knobs": (16, _forward("        triton.knobs.runtime.interpret = True\n" + FORWARD_END), "T16.python.global_flag"),
    "shrink_the_task": (17, "import model\n" + HONEST, "T3.python.import_task"),
    "write_a_file": (23, _forward("        open('/tmp/out', 'w').write('x')\n" + FORWARD_END), "T12.python.file_io"),
    "run_a_process": (23, "import os\n" + HONEST, "T23.python.process_access"),
}

RUNTIME: dict[str, tuple[int, str, str]] = {  # name -> (threat class, source, status of verify)
    "uninitialised_half": (21, _kernel("mask = offs < n\n", "mask = offs < n // 2\n"), "incorrect"),
    "kernel_writes_the_input": (5, _kernel("tl.store(out_ptr + offs, x * tl.sigmoid(x), mask=mask)",
                                           "tl.store(out_ptr + offs, x * tl.sigmoid(x), mask=mask)\n"
                                           "    tl.store(x_ptr + offs, x * 0.0, mask=mask)"), "rejected"),
    "return_the_input": (19, _forward(LAUNCH + "        return x\n"), "rejected"),
    # T4: an output the kernel never writes holds whatever the allocator left there (the reference ran elsewhere)
    "kernel_never_stores": (4, _kernel("    tl.store(out_ptr + offs, x * tl.sigmoid(x), mask=mask)\n", ""), "incorrect"),
}

RELU_TASK = '''"""ReLU over inputs the task samples non-negative, though ReLU accepts any real."""

import torch
import torch.nn as nn

batch_size = 64
dim = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
'''
#: T18: ReLU written as the identity: right on the task's non-negative inputs, wrong on widened ones.
RELU_AS_IDENTITY = HONEST.replace("x * tl.sigmoid(x)", "x").replace("swish", "relu")
GRADING: dict[str, tuple[int, str, str]] = {"relu_as_identity": (18, RELU_AS_IDENTITY, "incorrect")}

NOT_APPLICABLE: dict[int, str] = {
    20: "pinning data in L2 needs an access-policy window (torch.cuda / ctypes), refused statically (T9/T1); the "
        "shared timer resets persisting L2 and flushes before every call whatever the backend",
    22: "physically impossible times: the shared timing protocol's speed-of-light cap applies to every backend",
}
