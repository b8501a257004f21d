"""benchmarks/cpu_sampler.py: CPU seconds credited to the kind of process that spent them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from cpu_sampler import kind_of, summarize  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs /proc (Linux)")


def test_kinds_follow_the_command_line():
    assert kind_of("/usr/local/cuda/bin/nvcc -c kernels/a.cu -o a.o") == "build"
    assert kind_of("/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -quiet binding.cpp") == "build"
    assert kind_of("ninja -C build") == "build"
    assert kind_of("/usr/bin/python3 -s -P -m cuda_agent.harness.candidate_runner") == "runner"
    assert kind_of("/usr/bin/python3 -m cuda_agent.harness.reference --preimport") == "reference"
    assert kind_of("/usr/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)") == "generation"
    assert kind_of("python3 benchmarks/learning_curve.py --preset h200") == "run"
    assert kind_of("/usr/sbin/sshd -D") == "other"
    assert kind_of("/opt/bin/ninjago serve") == "other"  # a name that only starts like a build tool


def test_a_busy_build_process_is_credited_to_builds(tmp_path: Path):
    """A process named like a build tool burns ~2 s of CPU while the real sampler watches: its seconds land on
    'build', and the report's machine total covers them."""
    ninja = tmp_path / "ninja"
    ninja.symlink_to(sys.executable)
    out = tmp_path / "cpu.jsonl"
    sampler = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "cpu_sampler.py"), "--out", str(out),
                                "--interval", "0.2", "--report-every", "0.5", "--duration", "6"])
    time.sleep(1.0)  # the sampler's first look happens before the busy process exists
    busy = subprocess.run([str(ninja), "-c", "import time\nt = time.process_time()\n"
                           "while time.process_time() - t < 2.0: pass"], timeout=60)
    assert busy.returncode == 0
    assert sampler.wait(timeout=60) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) >= 3 and all(set(x) >= {"elapsed_s", "total_s", "kinds_s", "live", "load_1min"} for x in lines)
    totals = summarize(lines)
    assert 1.5 <= totals["kinds_s"]["build"] <= 2.5
    assert totals["total_cpu_s"] >= totals["kinds_s"]["build"]


def test_summarize_prints_totals_of_a_file(tmp_path: Path):
    path = tmp_path / "cpu.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [
        {"elapsed_s": 30.0, "total_s": 300.0, "kinds_s": {"build": 200.0, "runner": 60.0}, "unattributed_s": 40.0,
         "live": {}, "load_1min": 12.0},
        {"elapsed_s": 60.0, "total_s": 100.0, "kinds_s": {"build": 50.0}, "unattributed_s": 50.0, "live": {},
         "load_1min": 8.0}]) + "\n")
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cpu_sampler.py"), "--summarize", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["total_cpu_s"] == 400.0 and got["mean_busy_cpus"] == round(400 / 60, 2)
    assert got["kinds_s"] == {"build": 250.0, "unattributed": 90.0, "runner": 60.0}
    assert got["kinds_share"]["build"] == 0.625 and got["mean_load_1min"] == 10.0
