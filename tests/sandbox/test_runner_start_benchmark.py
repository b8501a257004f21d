"""benchmarks/runner_start.py on the CPU: real runners start, and each reports its start's phases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_runner_start_benchmark_reports_every_phase_of_real_runners(tmp_path: Path) -> None:
    out = tmp_path / "rs.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "runner_start.py"), "--backend", "cpu",
                           "--runners", "2", "--parallel", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["summary"]["runners"] == 2 and len(data["runners"]) == 2
    for row in data["runners"]:
        assert {"interpreter", "imports", "audit_warmup", "guard_snapshot"} <= set(row["phases"])
        assert row["start_cpu_s"] > 0 and row["start_s"] > 0
    assert "audit_warmup" in proc.stdout
