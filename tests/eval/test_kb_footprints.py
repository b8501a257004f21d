"""CPU smoke of benchmarks/kb_footprints.py over the vendored KernelBench problems: every problem sized on the meta
device with its set plan on an H200, and the figures it reports are the problems' own (no GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "kb_footprints.py"
DATA = REPO / "tests" / "kernelbench" / "data"


def test_the_footprints_of_the_vendored_problems(tmp_path: Path) -> None:
    out = tmp_path / "kb.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--kernelbench", str(DATA), "--levels", "1,2,3", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    rows = {r["problem"]: r for r in data["rows"]}
    assert set(rows) == {p.parent.name + "/" + p.stem for p in (DATA / "KernelBench").glob("level*/*.py")}
    relu = rows["level1/19_ReLU"]  # 4096 x 393216 fp32 in and out
    assert relu["method"] == "meta" and relu["input_bytes"] == relu["output_bytes"] == 4096 * 393216 * 4
    assert relu["plan"]["constrained"] and relu["plan"]["runner_sets"] >= 1  # 12 GiB sets: fewer than a session uses
    mlp = rows["level3/1_MLP"]
    assert mlp["param_bytes"] > 0 and not mlp["plan"]["constrained"]
    assert data["summary"]["level1"]["set_ge_8gib"] >= 2  # 19_ReLU and 23_Softmax


def test_a_missing_checkout_is_named(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--kernelbench", str(tmp_path / "nowhere")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "fetch_kernelbench.sh" in proc.stderr
