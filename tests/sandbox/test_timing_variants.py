"""The eager baseline timed under protocol variants inside a real reference process (issue 4's spread
diagnostics, ``benchmarks/eval_throughput.py --diagnose``), on CPU."""

from __future__ import annotations

import pytest

from cuda_agent.harness.reference import ReferenceError_, ReferenceProcess

CODE = (
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x):\n        return torch.sum(x, dim=1, keepdim=True)\n"
    "def get_inputs():\n    return [torch.randn(64, 4096)]\n"
    "def get_init_inputs():\n    return []\n"
)

VARIANTS = {"standard", "rotated_buffers", "fresh_timer", "flush_read", "no_flush", "no_preroll", "direct_op",
            "null", "copy"}


def test_every_variant_is_timed_in_the_reference_process_itself() -> None:
    ref = ReferenceProcess(CODE, "cpu")
    try:
        for k in (0, 1):
            ref.call("make_set", k, 100 + k, None, "host", False)
        got = ref.call("timing_variants", [0, 1], 5)
        assert set(got) == VARIANTS | {"info"}
        assert got["info"]["pid"] == ref.proc.pid and got["info"]["calls"] == 5
        for name in VARIANTS:
            v = got[name]
            assert 0 < v["min_ms"] <= v["median_ms"] and v["iqr_ms"] >= 0, (name, v)
        # A 1 MiB row sum takes longer than writing one element, whatever the machine.
        assert got["standard"]["median_ms"] > got["null"]["median_ms"]
        # None: sets of its own (a graded session's sets are gone by the time diagnostics run)
        own = ref.call("timing_variants", None, 3)
        assert own["info"]["pid"] == ref.proc.pid and own["standard"]["median_ms"] > own["null"]["median_ms"]
        with pytest.raises(ReferenceError_, match=r"sets \[0, 7\] are not all made"):
            ref.call("timing_variants", [0, 7], 5)
        with pytest.raises(ReferenceError_, match="calls must be at least 2"):
            ref.call("timing_variants", [0], 1)
    finally:
        ref.close()
