"""What the two timing processes (candidate runner, reference process) must agree on to time eager code alike.

The KernelBench self-check grades each task's own Model against itself, so every difference between how the runner
times the candidate and how the reference process times its baselines shows as a self-speedup off 1.0. The level-3
LSTMs and GRU read 0.67-0.81 on the GPU (session 38). The differences, ranked by their likely effect on a host-bound
call with thousands of small launches (docs/timing-experiments.md "The RNNs' timing band" has the reasoning):

1. CUPTI attached. The runner's op audit runs a Kineto profiler (at its start, and on audited calls); when it stops,
   Kineto keeps CUPTI subscribed to the CUDA runtime and driver unless ``TEARDOWN_CUPTI=1`` is in the environment,
   and every later launch pays CUPTI's callback. The reference process never profiles before its batches. Fixed
   behind a switch (off by default until it runs on a GPU, :data:`TEARDOWN_SWITCH`): :data:`FORCED` sets it in both
   processes at their start (Kineto reads it with ``getenv`` when a profiler stops;
   torch itself sets it to "0" only for a CUDA-graph ``torch.compile`` or trace, on CUDA < 12.6 or where CUPTI's lazy
   re-initialisation is not allowed with CUDA graphs).
2. The spin on calls whose host waits for the device: fixed by :mod:`cuda_agent.harness.spin_policy`, the same
   rule on both sides.
3. Environment variables that change how torch allocates and launches (the caching allocator's configuration,
   lazy module loading, connections, cuBLAS's workspace, launch blocking): the reference process inherits the
   parent's environment, the runner got a filtered one. Fixed: :data:`PASSED` goes to both.
4. The cyclic garbage collector: off during the runner's calls (T11), on in the reference's. Fixed: off during the
   baselines' timed calls too (harness/reference_baselines.py).
5. Left as they are, with why: the sandbox (namespaces cost nothing per launch; the seccomp-free bubblewrap adds no
   system-call filter), the runner's blocked asynchronous signals (no signal arrives during a call), the guard's
   native-code digests (read between calls, never during one), interpreter flags (``-s -P``: import paths only),
   threads (both run ``sandbox.cpu_threads`` intra-op threads: tests/sandbox/test_cpu_threads.py), CPU placement
   (both follow ``timing_cpus``) and priority (neither is niced; builds and probes are).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping
from typing import Any

#: Set in both timing processes' environments whatever the parent's own ``TEARDOWN_CUPTI`` says, so the two always
#: agree. ``TEARDOWN_CUPTI=1``: Kineto detaches CUPTI (``cuptiFinalize``, from a later runtime callback) when a
#: profiler stops, so launches after the op audit cost what they cost in a process that never profiled. It must be in
#: the environment before the profiler stops (Kineto's ``getenv`` at teardown); set at spawn, it is there before
#: anything runs. The value is ``"1"`` only where the parent's environment has :data:`TEARDOWN_SWITCH` ``=1``, else
#: ``"0"`` (CUPTI stays attached after the audit, as before session 39); an empty dict (the parity benchmark's
#: "CUPTI kept" variant) sets nothing.
FORCED: dict[str, str] = {"TEARDOWN_CUPTI": "0"}
#: Off by default until it has run on a GPU: after a teardown, the next audit sets CUPTI up again, and a CUPTI thread
#: started inside an audited call that the guard cannot place would reject every honest candidate
#: (T10.runtime.thread_started); the gate is tests/sandbox/test_host_sync_parity.py's GPU test, then the RNN rows of
#: a kb_check (scripts/gpu_session.sh exports it for the ``host_sync`` part).
TEARDOWN_SWITCH = "CUDA_AGENT_TEARDOWN_CUPTI"
#: Variables of the parent's environment both processes run with where the parent has them: they change how torch
#: allocates device memory, loads modules and launches kernels. The reference process inherits the parent's whole
#: environment; the runner's is built from a short list (harness/sandbox.py), so these are added to it.
PASSED: tuple[str, ...] = (
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUDA_MODULE_LOADING",
    "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_LAUNCH_BLOCKING", "CUBLAS_WORKSPACE_CONFIG", "CUDNN_LOGINFO_DBG",
    "TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT", "DISABLE_CUPTI_LAZY_REINIT", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
)
#: Every variable the two processes are compared on (``OMP_NUM_THREADS``: both get ``sandbox.cpu_threads``).
COMPARED: tuple[str, ...] = (*FORCED, *PASSED, "OMP_NUM_THREADS")


def timing_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The timing part of a child's environment from its parent's ``environ``: :data:`PASSED` where set, then
    :data:`FORCED`."""
    env = {k: environ[k] for k in PASSED if k in environ}
    env.update({k: ("1" if environ.get(TEARDOWN_SWITCH) == "1" else "0") for k in FORCED})
    return env


def process_timing_state(torch: Any) -> dict[str, Any]:
    """This process's timing state, as it is now (in the runner: after its op audit's warm-up): the
    :data:`COMPARED` variables of its live environment (None where unset), whether an autograd/Kineto profiler is
    running, whether the cyclic collector is on, torch's intra-op and inter-op thread counts."""
    state: dict[str, Any] = {f"env.{k}": os.environ.get(k) for k in COMPARED}
    enabled = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
    state["profiler_enabled"] = bool(enabled()) if enabled is not None else None
    state["gc_enabled"] = gc.isenabled()
    state["threads"] = int(torch.get_num_threads())
    state["interop_threads"] = int(torch.get_num_interop_threads())
    return state


def timing_state_differences(runner: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    """Where two :func:`process_timing_state` snapshots differ, in words (empty: they match); a key one of them
    lacks counts as a difference."""
    return [f"{k}: runner {runner.get(k)!r}, reference {reference.get(k)!r}"
            for k in sorted(set(runner) | set(reference)) if runner.get(k) != reference.get(k)]
