"""CPU smoke of benchmarks/fresh_hand_over.py: both hand-over modes run through the real backend and the JSON
says which one each set took (on the H200: ``bash scripts/gpu_session.sh hand_over``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_fresh_hand_over_benchmark_compares_files_and_descriptors_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "fresh_hand_over.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fresh_hand_over.py"), "--backend", "cpu",
                           "--tasks", "swish", "--profiles", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    swish = data["tasks"]["swish"]
    assert set(swish) == {"files", "descriptors"}
    for mode, figures in swish.items():
        [run] = figures["runs"]
        assert run["sets"] >= 4 and figures["fallbacks"] == 0, (mode, figures)
        assert figures["hand_over_ms_per_set"] > 0 and figures["candidate_ms"] > 0
    assert "mean hand-over per set: files" in proc.stdout
    assert data["descriptors_hand_over_ms_per_set"] == swish["descriptors"]["hand_over_ms_per_set"]
