"""CUDA path of the evaluator (run on the H200 with ``pytest -m gpu tests/sandbox``).

Real nvcc-built kernels in a real ``cuda_extension``: inputs and outputs
cross processes staged through the host (the 'host' transport, the default
under bubblewrap) or by CUDA IPC (unsandboxed candidates) and are compared
on the GPU; cheats that only
exist on a GPU (side streams, uninitialised memory, illegal accesses,
persisting L2) are exercised.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

KERNELS_CU = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void slow_relu_kernel(const float* x, float* y, int64_t n, long long spin) {
  long long start = clock64();
  while (clock64() - start < spin) { }
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void bad_write_kernel(float* y) { y[threadIdx.x] = 1.f; }

void relu_launch(const float* x, float* y, int64_t n) {
  relu_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}

void side_stream_relu_launch(const float* x, float* y, int64_t n) {
  static cudaStream_t side = nullptr;
  if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  slow_relu_kernel<<<(n + 255) / 256, 256, 0, side>>>(x, y, n, 20000000LL);
}

void noop_launch(float* y) { (void)y; }

void illegal_launch() { bad_write_kernel<<<1, 32>>>(reinterpret_cast<float*>(16)); }
"""

BINDING_CPP = r"""
#include "../binding_registry.h"
void relu_launch(const float* x, float* y, int64_t n);
void side_stream_relu_launch(const float* x, float* y, int64_t n);
void noop_launch(float* y);
void illegal_launch();

void relu_forward(const at::Tensor& x, const at::Tensor& out) {
  relu_launch(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}
void side_relu_forward(const at::Tensor& x, const at::Tensor& out) {
  side_stream_relu_launch(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());
}
void noop_forward(const at::Tensor& out) { noop_launch(out.mutable_data_ptr<float>()); }
void illegal_forward() { illegal_launch(); }
REGISTER_BINDING(relu_forward, relu_forward);
REGISTER_BINDING(side_relu_forward, side_relu_forward);
REGISTER_BINDING(noop_forward, noop_forward);
REGISTER_BINDING(illegal_forward, illegal_forward);
"""

TASK = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)


    def get_inputs():
        return [torch.randn(2048, 2048)]


    def get_init_inputs():
        return []
    """
)


def _model_new(body: str) -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport cuda_extension\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n" + body + "\n"
    )


HONEST = _model_new("        out = torch.empty_like(x)\n        cuda_extension.relu_forward(x, out)\n        return out")
#: Returns memory its kernel never writes (NaN-poisoned by the harness).
UNWRITTEN = _model_new("        out = torch.empty_like(x)\n        cuda_extension.noop_forward(out)\n        return out")


@pytest.fixture(scope="module")
def cuda_kit(kit_builder) -> Path:  # type: ignore[no-untyped-def]
    return kit_builder("cuda-kit", {"ops.cu": KERNELS_CU, "ops_binding.cpp": BINDING_CPP}, "cuda", HONEST)


@pytest.fixture(scope="module")
def gpu_evaluator(make_evaluator) -> Iterator[object]:
    """The CUDA 'standard' preset (its 200 us pre-roll spin) with fewer timed calls."""
    ev = make_evaluator("cuda", timing={"compile_baseline": True}, limits={"gpu_memory_mb": 20000},
                        protocol={"min_calls": 10, "max_calls": 30})
    yield ev
    ev.close()


@pytest.fixture(scope="module")
def task():  # type: ignore[no-untyped-def]
    from cuda_agent.schemas.task import TaskManifest

    return TaskManifest.from_code("tests/gpu_relu", TASK)


def _ws(tmp_path: Path, code: str, name: str = "ws") -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / "model.py").write_text(TASK)
    (root / "model_new.py").write_text(code)
    return root


def test_profile_net_of_the_protocol_cost(make_evaluator, task, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With ``net_overhead`` (an experiment) the runner measures its null-call cost under the timing lock before the
    candidate is loaded and the trusted side subtracts it; candidate and baselines record the net method."""
    from cuda_agent.harness.timing_stats import MAX_OVERHEAD_MS

    # The CUDA 'standard' preset (its 200 us pre-roll spin): net timing is refused without a spin.
    with make_evaluator("cuda", protocol={"min_calls": 10, "max_calls": 30, "net_overhead": True}) as ev:
        p = ev.profile(task, _ws(tmp_path, HONEST), cuda_kit)
    d = p.diagnostics
    assert p.status.value == "correct", p.summary_for_agent() + str(d)
    spins = (d.runner_spin, d.runner_spin_recalibrated)  # at the runner's start; under the lock
    for spin in spins:
        assert spin.preroll_us == 200.0 and len(spin.probes_ms) == 5, spins
        assert spin.cycles_per_us == pytest.approx(1e6 / (min(spin.probes_ms) * 1e3), rel=1e-3), spins
    assert 0.0005 < d.timing_overhead_ms < MAX_OVERHEAD_MS, d  # a few microseconds on the H200
    assert p.timing is not None and p.timing.method == "events_l2flush_net" and p.timing.median_ms > 0
    assert p.baselines is not None and p.baselines.eager is not None
    assert p.baselines.eager.method == "events_l2flush_net" and p.speedup_eager is not None


def test_cuda_verify_and_profile(gpu_evaluator, task, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ws = _ws(tmp_path, HONEST)
    v = gpu_evaluator.verify(task, ws, cuda_kit)
    assert v.status.value == "correct", v.summary_for_agent() + str(v.diagnostics)
    # seeded input sets: the runner's sets, made on the GPU from the same seeds, match the trusted ones.
    assert v.diagnostics.input_sets.staged == 0 and v.diagnostics.input_sets.seeded >= 1, v.diagnostics
    if v.isolation == "bwrap":  # outputs crossed the sandbox as device buffers, not through host files
        assert v.diagnostics.transport == "vmm" and v.diagnostics.transport_note is None, v.diagnostics
    p = gpu_evaluator.profile(task, ws, cuda_kit)
    assert p.status.value == "correct", p.summary_for_agent() + str(p.diagnostics)
    assert p.timing is not None and p.timing.method == "events_l2flush"
    assert p.baselines is not None and p.baselines.eager is not None and p.baselines.compile is not None
    assert p.speedup_eager is not None and p.speedup_eager > 0.2
    assert p.timing.per_kernel, "per-kernel breakdown expected on CUDA"
    assert p.provenance.device
    spin = p.diagnostics.runner_spin  # the preset's 200 us spin, sized by the runner as it started
    assert spin.preroll_us == 200.0 and len(spin.probes_ms) == 5 and spin.cycles_per_us > 0, spin


def test_cuda_ipc_transport_without_bubblewrap(make_evaluator, task, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """CUDA IPC handles work between processes of one PID namespace (isolation 'process', stamped as weakened)."""
    ev = make_evaluator("cuda", integrity={"isolation": "process"}, verify={"input_sets": 2}, cuda_transport="ipc",
                        input_transport="staged", protocol={"min_calls": 5, "max_calls": 10})
    try:
        v = ev.verify(task, _ws(tmp_path, HONEST), cuda_kit)
        assert v.status.value == "correct", v.summary_for_agent() + str(v.diagnostics)
        assert v.integrity_weakened == ["isolation=process"] and v.diagnostics.transport == "ipc"
        r = ev.verify(task, _ws(tmp_path, UNWRITTEN, "bad"), cuda_kit)
        assert r.status.value == "incorrect" and any(e.check == "nan" for e in r.errors), r.summary_for_agent()
    finally:
        ev.close()


@pytest.mark.parametrize("transport", ["vmm", "host"])
def test_outputs_cross_the_sandbox_by_each_transport_with_the_same_verdicts(make_evaluator, task, cuda_kit, tmp_path, transport) -> None:  # type: ignore[no-untyped-def]
    """'vmm' (device buffers passed as file descriptors) and 'host' (files) judge alike: the honest candidate
    correct, one that returns memory its kernel never wrote incorrect (NaN)."""
    ev = make_evaluator("cuda", verify={"input_sets": 2}, cuda_transport=transport,
                        protocol={"min_calls": 5, "max_calls": 10})
    try:
        v = ev.verify(task, _ws(tmp_path, HONEST), cuda_kit)
        assert v.status.value == "correct", v.summary_for_agent() + str(v.diagnostics)
        assert v.diagnostics.transport == transport and ev.transport.vmm_failure is None, (v.diagnostics, ev.transport.vmm_failure)
        r = ev.verify(task, _ws(tmp_path, UNWRITTEN, "bad"), cuda_kit)
        assert r.status.value == "incorrect" and any(e.check == "nan" for e in r.errors), r.summary_for_agent()
    finally:
        ev.close()


@pytest.mark.parametrize(("transport", "kind"), [("vmm", "vmm"), ("host", "memfd")])
def test_fresh_sets_are_handed_over_by_descriptor_on_cuda(make_evaluator, task, cuda_kit, tmp_path, transport, kind) -> None:  # type: ignore[no-untyped-def]
    """Fresh sets staged outside the device lock reach the candidate as descriptors: device allocations exported by
    the reference ('vmm') or memory files read through the runner's pinned buffer ('host'); none falls back to
    the slot files, and the candidate is timed and judged as with files."""
    with make_evaluator("cuda", verify={"input_sets": 2}, cuda_transport=transport,
                        protocol={"min_calls": 5, "max_calls": 10}) as ev:
        p = ev.profile(task, _ws(tmp_path, HONEST), cuda_kit)
        g = ev.grade(task, _ws(tmp_path, HONEST, "ws2"), cuda_kit)
        r = ev.grade(task, _ws(tmp_path, UNWRITTEN, "bad"), cuda_kit)
        confirmed, failures = set(ev.transport.fd_confirmed), dict(ev.transport.fd_failures)
    for result in (p, g):
        d = result.diagnostics
        assert result.status.value == "correct", result.summary_for_agent() + str(d)
        assert not d.fresh_set_fallbacks, d.fresh_set_fallbacks
        assert d.fresh_hand_overs >= 4 and d.phase_s["fresh_hand_over"] > 0
    assert confirmed == {kind} and not failures, (confirmed, failures)
    assert r.status.value == "incorrect" and any(e.check == "nan" for e in r.errors), r.summary_for_agent()


def test_side_stream_work_is_timed_by_device_sync(gpu_evaluator, task, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = _model_new("        out = torch.empty_like(x)\n        cuda_extension.side_relu_forward(x, out)\n        return out")
    p = gpu_evaluator.profile(task, _ws(tmp_path, code), cuda_kit)
    # 20M clock cycles of spinning (~10 ms at ~2 GHz) on a side stream the events do not see.
    if p.status.value == "correct":
        assert p.timing is not None and p.timing.median_ms > 2.0
    else:
        assert p.status.value in ("rejected", "incorrect")


def test_uninitialised_output_is_caught_by_nan_poisoning(gpu_evaluator, task, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    v = gpu_evaluator.verify(task, _ws(tmp_path, UNWRITTEN), cuda_kit)
    assert v.status.value == "incorrect"
    assert any(e.check == "nan" for e in v.errors)


def test_illegal_memory_access_is_contained(gpu_evaluator, task, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = _model_new("        cuda_extension.illegal_forward()\n        torch.cuda.synchronize()\n        return x")
    v = gpu_evaluator.verify(task, _ws(tmp_path, code), cuda_kit)
    assert v.status.value == "error"
    root2 = tmp_path / "next"
    root2.mkdir()
    (root2 / "model.py").write_text(TASK)
    (root2 / "model_new.py").write_text(HONEST)
    again = gpu_evaluator.verify(task, root2, cuda_kit)
    assert again.status.value == "correct", again.summary_for_agent()


def test_returning_input_rejected_on_cuda(gpu_evaluator, task, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    v = gpu_evaluator.verify(task, _ws(tmp_path, _model_new("        return x")), cuda_kit)
    assert v.status.value == "rejected" and v.rule.startswith("T19")


def test_persisting_l2_reset_and_flush() -> None:
    import torch

    from cuda_agent.harness.timing import DeviceTimer

    timer = DeviceTimer("cuda:0")
    assert timer._rt is not None, "libcudart not found: persisting L2 cannot be reset"
    assert timer._rt.cudaCtxResetPersistingL2Cache() == 0
    props = torch.cuda.get_device_properties(0)
    assert timer.flush_buf.numel() * 4 >= props.L2_cache_size
    _, ms, host_ms = timer.time_call(lambda: torch.ones(1 << 20, device="cuda").sum())
    assert ms > 0 and host_ms > 0


def test_gpu_compare_is_chunked_and_exact() -> None:
    import torch

    from cuda_agent.harness.compare import compare_output, fingerprint

    e = torch.randn(40_000_000, device="cuda")
    a = e.clone()
    assert compare_output(e, a, atol=1e-2, rtol=1e-2) == []
    a[33_000_123] += 1.0
    errs = compare_output(e, a, atol=1e-2, rtol=1e-2)
    assert errs and errs[0].details["worst_index"] == [33_000_123]
    assert fingerprint(e) != fingerprint(a)


def test_sanitizer_gate_memcheck(make_evaluator, task, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One verify set under compute-sanitizer: an honest kernel passes; a requested sanitizer that is not installed
    is a harness error when the evaluator is made, never a silent pass."""
    import shutil

    from cuda_agent.harness.sanitizer import SanitizerUnavailable

    if shutil.which("compute-sanitizer") is None:
        with pytest.raises(SanitizerUnavailable, match="compute-sanitizer is not on PATH"):
            make_evaluator("cuda", integrity={"sanitizer": "memcheck"})
        return
    with make_evaluator("cuda", verify={"input_sets": 2}, integrity={"sanitizer": "memcheck"},
                        sandbox={"runners_ahead": 0}) as ev:
        ok = ev.verify(task, _ws(tmp_path, HONEST), cuda_kit)
        assert ok.status.value == "correct", ok.summary_for_agent() + str(ok.diagnostics.sanitizer)
        assert ok.diagnostics.sanitizer.exit_code == 0


def test_preroll_times_device_work_but_still_sees_long_host_work() -> None:
    """With a pre-call spin the events time the kernel, not its launch; host work longer than the spin still counts."""
    import statistics
    import time

    import torch

    from cuda_agent.harness.timing import DeviceTimer

    x = torch.ones(1024, device="cuda")
    plain = DeviceTimer("cuda:0", preroll_us=0)
    spun = DeviceTimer("cuda:0", preroll_us=50)
    assert spun._preroll_cycles > 0

    def med(timer: DeviceTimer, fn) -> float:  # type: ignore[no-untyped-def]
        return statistics.median(timer.time_call(fn)[1] for _ in range(30))

    tiny = lambda: x.add(1)  # noqa: E731
    assert med(spun, tiny) <= med(plain, tiny)  # launch latency is outside the events now

    def host_then_kernel():  # type: ignore[no-untyped-def]
        time.sleep(0.002)  # 2 ms of host work (T8-style), 40x the spin
        return x.add(1)

    assert med(spun, host_then_kernel) > 1.5  # the GPU idled waiting for the launch: still timed


def test_a_runners_dropped_copy_is_freed_in_the_reference(make_evaluator, cuda_kit, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A memory-constrained session hands sets over by 'vmm': the runner's copy IS the reference's export
    allocation. When the runner drops it to make room, the reference frees it (before session 33 it stayed until
    the reference dropped the set too: KernelBench 96_HuberLoss held 32 GiB outside its plan and ran out of memory
    even alone)."""
    from cuda_agent.harness.memory_budget import session_bytes
    from cuda_agent.harness.tasks import load_task_code

    sized = load_task_code(TASK, "tests/gpu_relu_sized", device="cuda", isolation="process")
    with make_evaluator("cuda", cuda_transport="vmm") as probe:
        fp = probe.memory.footprint(sized)
    assert fp is not None
    capacity = session_bytes(fp, "cuda", 4, 2, 1) + (8 << 20)  # two sets in the runner, more in the reference
    with make_evaluator("cuda", verify={"input_sets": 5}, cuda_transport="vmm",
                        limits={"device_memory_gib": capacity / 2**30},
                        protocol={"min_calls": 5, "max_calls": 10}) as ev:
        g = ev.grade(sized, _ws(tmp_path, HONEST), cuda_kit)
    mem = g.diagnostics.memory
    assert g.status.value == "correct", g.summary_for_agent()
    assert mem is not None and mem.runner_sets == 2 and mem.reference_sets >= 3, mem
    assert mem.exports_released_bytes >= fp.input_bytes, mem  # at least one dropped copy freed at the drop
