"""CPU smoke of benchmarks/check_path_probe.py: every step of the output check is timed with the project's own
functions, and a cuda request on a machine without a GPU is refused with a clear message (on the H200:
``bash scripts/gpu_session.sh check_probe``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "benchmarks" / "check_path_probe.py"


def test_the_probe_times_each_check_step_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    proc = subprocess.run([sys.executable, str(PROBE), "--device", "cpu", "--gib", "0.004", "--repeats", "2",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert set(data["median_s"]) == {"fingerprint", "reference_rms", "compare", "alloc", "call_copy_inputs",
                                     "call_poison", "call_input_fingerprint"}  # no 'vmm' steps on CPU
    assert all(len(runs) == 2 and all(s >= 0 for s in runs) for runs in data["runs_s"].values())
    assert data["numel"] == int(0.004 * 2**30) // 4
    assert "compare:" in proc.stdout


def test_a_cuda_probe_without_a_gpu_says_so() -> None:
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "needs a CUDA device" in proc.stderr
