"""The candidate runner and the reference process time eager calls in the same conditions (real processes).

The KernelBench self-check's LSTMs and GRU read 0.67-0.81 on the GPU: the runner timed the same eager code slower
than the reference process did. The runner's op audit starts a Kineto profiler (at its start, on audited calls),
and Kineto keeps CUPTI attached after it stops unless ``TEARDOWN_CUPTI=1`` was in the environment; the reference
process inherits the parent's whole environment while the runner's is built from a short list. Both now start with
the same timing environment (harness/timing_env.py), and the runner reports its state after the audit's warm-up.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cuda_agent.harness.candidate_pool import CandidatePool
from cuda_agent.harness.reference_client import ReferenceClient
from cuda_agent.harness.sandbox import RunnerOptions
from cuda_agent.harness.settings import HarnessSettings
from cuda_agent.harness.timing_env import FORCED, PASSED, TEARDOWN_SWITCH, timing_env, timing_state_differences

TASK = """import gc
import torch
import torch.nn as nn

LOG = {log!r}


class Model(nn.Module):
    def forward(self, x):
        with open(LOG, "a") as f:  # whether the cyclic collector was on during this call
            f.write("on\\n" if gc.isenabled() else "off\\n")
        return x * 2.0


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""

#: What the parent's environment says, each different from what the children must run with or worth passing on.
PARENT = {"TEARDOWN_CUPTI": "0", TEARDOWN_SWITCH: "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "CUDA_MODULE_LOADING": "EAGER",
          "CUDA_DEVICE_MAX_CONNECTIONS": "8"}


@pytest.mark.slow
def test_runner_and_reference_report_the_same_timing_state_after_the_audit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in PARENT.items():
        monkeypatch.setenv(k, v)
    threads = HarnessSettings().sandbox.cpu_threads
    pool = CandidatePool(RunnerOptions(device="cpu", cpu_threads=threads, scratch_dir=tmp_path / "runner"), 0)
    proc = pool.acquire()
    try:
        runner = proc.wait_ready().timing_state  # after its op audit's warm-up, before any candidate code
    finally:
        pool.release(proc)
        pool.close()
    ref = ReferenceClient("cpu", threads=threads)
    try:
        ref.start(TASK.format(log=str(tmp_path / "calls.log")))
        reference = ref.timing_state()
    finally:
        ref.close()
    assert runner and reference
    assert timing_state_differences(runner, reference) == []
    assert runner["env.TEARDOWN_CUPTI"] == "1"  # whatever the parent said: set before any profiler starts
    for k in ("PYTORCH_CUDA_ALLOC_CONF", "CUDA_MODULE_LOADING", "CUDA_DEVICE_MAX_CONNECTIONS"):
        assert runner[f"env.{k}"] == PARENT[k]
    assert runner["profiler_enabled"] is False  # the audit's profiler stopped


@pytest.mark.slow
def test_the_baselines_timed_calls_run_with_the_collector_off_as_the_runners_do(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    ref = ReferenceClient("cpu", threads=1)
    try:
        ref.start(TASK.format(log=str(log)))
        ref.make_set(0, 123, None, "host", False)
        ref.time_baseline("eager", [0], 2, 1)  # the first batch also checks, untimed, whether inputs are written
        log.write_text("")
        ref.time_baseline("eager", [0], 5, 1)
    finally:
        ref.close()
    assert log.read_text().split() == ["off"] * 6


def test_the_timing_environment_forces_the_teardown_and_passes_the_allocators_settings() -> None:
    env = timing_env({"TEARDOWN_CUPTI": "0", TEARDOWN_SWITCH: "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                      "HOME": "/x"})
    assert env == {"TEARDOWN_CUPTI": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    # off by default (until it has run on a GPU): both processes then get "0", whatever the parent's own value says,
    # so the runner (a filtered environment) and the reference process (the parent's) still agree
    assert timing_env({"TEARDOWN_CUPTI": "1"}) == {"TEARDOWN_CUPTI": "0"}
    assert timing_env({TEARDOWN_SWITCH: "yes"}) == {"TEARDOWN_CUPTI": "0"}
    assert set(FORCED).isdisjoint(PASSED)
    assert timing_state_differences({"a": 1, "b": 2}, {"a": 1}) == ["b: runner 2, reference None"]


@pytest.mark.slow
def test_the_parity_benchmark_times_each_side_on_the_cpu_backend(tmp_path: Path) -> None:
    """benchmarks/host_sync_parity.py (run on the GPU by scripts/gpu_session.sh's host_sync part) on the CPU:
    every variant's process starts with its side's environment and reports its timing state."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "parity.json"
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "host_sync_parity.py"), "--device", "cpu",
                           "--size", "small", "--calls", "3", "--warmup", "1", "--h0-on-host",
                           "--variants", "reference,runner,runner_cupti_kept", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    variants = json.loads(out.read_text())["variants"]
    assert variants["reference"]["ratio_to_reference"] == 1.0
    assert all(len(v["samples_ms"]) == 3 and v["median_ms"] > 0 for v in variants.values())
    assert variants["runner"]["state"]["env.TEARDOWN_CUPTI"] == "1"
    assert variants["reference"]["state"]["env.TEARDOWN_CUPTI"] == "1"
    assert variants["runner_cupti_kept"]["state"]["env.TEARDOWN_CUPTI"] is None  # the switch reached the process


AUDIT_TWICE = """
import json
import torch
from cuda_agent.harness.integrity import runtime
x = torch.randn(1024, device="cuda")
seen = []
for j in range(4):  # the audit's warm-up, then audited calls: CUPTI is torn down after each and set up again
    with runtime.audit_ops() as log:
        (x * 2.0).sum()
    torch.cuda.synchronize()
    seen.append(len(log.kernels))
    if j == 0:  # the runner's guard snapshot comes after its audit warm-up
        before = runtime._native_threads()
after = runtime._native_threads()
unaccounted = sorted(c for t, c in after.items() if t not in before and t not in runtime._HARNESS_THREADS)
print(json.dumps([seen, unaccounted]))
"""


@pytest.mark.gpu
def test_the_op_audit_still_sees_kernels_after_cupti_was_torn_down() -> None:
    """With TEARDOWN_CUPTI=1 Kineto detaches CUPTI after each audit and attaches it again at the next (lazy
    re-initialisation): every audit must still list the kernels it ran (the kernel-origin rule reads them), and the
    threads CUPTI starts again must be counted as the harness's, as the guard's thread check needs."""
    import subprocess
    import sys

    env = {**os.environ, **timing_env({**os.environ, TEARDOWN_SWITCH: "1"})}
    proc = subprocess.run([sys.executable, "-c", AUDIT_TWICE], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts, unaccounted = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(counts) == 4 and all(n >= 2 for n in counts), counts
    # CUPTI's threads, gone with the teardown and started again by the next audit, are the harness's: a thread the
    # guard cannot place would reject every honest candidate (T10.runtime.thread_started)
    assert unaccounted == [], unaccounted
