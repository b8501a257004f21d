"""Checks run INSIDE the candidate process: guard snapshots, op audit, kernel origin (THREATS.md 1, 7, 8, 10, 16).

The candidate runner takes ``take_guard_snapshot()`` before the candidate's module is imported and compares with
``compare_guard_snapshot`` after loading and after calls: replaced timing/checking functions (native timing code
too: ``native_guard``), installed torch modes or trace hooks, flipped global flags, changed environment variables
and new threads (Python and native, counted from ``/proc/self/task``) are violations. ``audit_ops()`` records the
ATen ops (and, on CUDA, the GPU kernels) that ran during a forward; ``op_audit_violations`` and
``kernel_origin_violations`` judge them.

Everything here runs where the candidate could tamper with it, so each check
is backed by one from outside the process (symbols of the built binary,
comparison and timing decisions in the trusted parent); see docs/integrity.md.
This module imports nothing heavy at import time: torch is imported by the
functions, which the runner calls after it has imported torch itself.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from cuda_agent.harness.integrity.native_guard import native_changes, native_timer_code
from cuda_agent.harness.integrity.kernel_origin import base_kernel_name, kernel_origin_violations
from cuda_agent.harness.integrity.signal_guard import signal_changes, signal_state
from cuda_agent.harness.integrity.violation import Violation

#: Dotted names of timing functions whose identity must not change (T8).
TIMER_FUNCTIONS: tuple[str, ...] = (
    "time.perf_counter", "time.perf_counter_ns", "time.monotonic", "time.monotonic_ns", "time.time", "time.time_ns",
    "time.process_time", "time.sleep", "statistics.median", "statistics.mean", "statistics.stdev",
    "statistics.quantiles", "builtins.sorted", "builtins.min", "builtins.max", "builtins.sum", "builtins.len",
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.elapsed_time", "torch.cuda.Event.record",
    "torch.cuda.Event.synchronize", "torch.cuda.Event.query", "torch.cuda.Event.wait", "torch.cuda.current_stream",
    "torch.cuda.default_stream", "torch.cuda.Stream.synchronize", "torch._C._cuda_synchronize",
    "torch.profiler.profile", "torch.autograd.profiler.profile",
    "cuda_agent.harness.timing.DeviceTimer.time_call", "cuda_agent.harness.timing.DeviceTimer.flush",
    "cuda_agent.harness.timing.DeviceTimer.sync", "cuda_agent.harness.timing.warm_input_pages",
    "cuda_agent.harness.timing.DeviceTimer._take", "cuda_agent.harness.timing.DeviceTimer._cycles_for",
    "cuda_agent.harness.timing.next_spin_us", "torch.cuda._sleep", "cuda_agent.harness.spin_policy.next_spin_us",
    "cuda_agent.harness.spin_policy.adaptive_spin_us", "cuda_agent.harness.spin_policy.SpinPolicy.observe",
    "cuda_agent.harness.spin_policy.SpinPolicy.first_spin_us",
    "cuda_agent.harness.spin_policy.SpinPolicy.retake_spin_us", "cuda_agent.harness.spin_policy.timed_takes",
    "cuda_agent.harness.timing.timed_takes",
)

#: Dotted names of checking functions and torch entry points the harness relies on (T7).
CHECKER_FUNCTIONS: tuple[str, ...] = (
    "torch.allclose", "torch.isclose", "torch.equal", "torch.testing.assert_close", "torch.isnan", "torch.isfinite",
    "torch.isinf", "torch.abs", "torch.max", "torch.Tensor.allclose", "torch.Tensor.__eq__", "torch.Tensor.__sub__",
    "torch.Tensor.abs", "torch.Tensor.max", "torch.Tensor.clone", "torch.Tensor.copy_", "torch.Tensor.data_ptr",
    "torch.Tensor.untyped_storage", "torch.Tensor.__torch_function__", "torch.Tensor.to", "torch.Tensor.float",
    "torch.Tensor.cpu", "torch.Tensor.item", "torch.Tensor.tolist", "torch.nn.Module.__call__",
    "torch.nn.Module._call_impl", "builtins.isinstance", "builtins.type", "builtins.getattr", "math.isclose",
    "math.isfinite", "cuda_agent.harness.compare.fingerprint", "cuda_agent.harness.checksum.device_checksum",
    "torch._int_mm",
)

#: Environment variables always reported by name when they change (others are reported too, by count).
WATCHED_ENV: tuple[str, ...] = (
    "CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES", "NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_CUDNN_V8_API_ENABLED", "CUDA_MODULE_LOADING",
)

#: Environment variables torch itself sets lazily (never a candidate's doing that matters).
IGNORED_ENV: frozenset[str] = frozenset({"TORCHINDUCTOR_CACHE_DIR"})

_OPENMP_LIBS = ("libgomp", "libiomp", "libomp")

# Native thread ids started by the harness's own profiler inside audit_ops (not the candidate's).
_HARNESS_THREADS: set[str] = set()

# Guarded objects stay referenced so that their id() cannot be reused by another object.
_PINNED: list[Any] = []


def _resolve(dotted: str) -> Any:
    """The object at ``dotted`` among modules already imported (never imports anything new)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is None:
            continue
        obj: Any = module
        for attr in parts[i:]:
            try:
                # the raw attribute (no descriptor binding), so the identity is stable between snapshots
                obj = inspect.getattr_static(obj, attr)
            except AttributeError:
                return None
        return obj
    return None


def _identities(names: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        obj = _resolve(name)
        if obj is not None:
            _PINNED.append(obj)
            out[name] = id(obj)
    return out


def _torch_flags() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    readers = {
        "backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "backends.cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
        "backends.cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
        "backends.cudnn.enabled": lambda: torch.backends.cudnn.enabled,
        "backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
            lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
            lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "default_dtype": lambda: str(torch.get_default_dtype()),
        "default_device": lambda: str(torch.get_default_device()),
        "grad_enabled": torch.is_grad_enabled,
        "inference_mode": torch.is_inference_mode_enabled,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "anomaly_enabled": torch.is_anomaly_enabled,
        "num_threads": torch.get_num_threads,
    }
    flags: dict[str, Any] = {}
    for name, read in readers.items():
        try:
            flags[name] = read()
        except Exception as exc:  # a flag missing in this torch build
            flags[name] = f"<unreadable: {type(exc).__name__}>"
    return flags


def _modes() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    modes: dict[str, Any] = {
        "sys.gettrace": sys.gettrace() is not None,
        "sys.getprofile": sys.getprofile() is not None,
        "threading.gettrace": threading.gettrace() is not None,
        "threading.getprofile": threading.getprofile() is not None,
    }
    if torch is not None:
        with contextlib.suppress(Exception):
            modes["torch_function_modes"] = int(torch._C._len_torch_function_stack())
        with contextlib.suppress(Exception):
            modes["torch_dispatch_modes"] = int(torch._C._len_torch_dispatch_stack())
    return modes


def _native_threads() -> dict[str, str]:
    """tid -> thread name (comm) of every native thread of this process."""
    out: dict[str, str] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            out[tid] = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
        except OSError:
            out[tid] = "?"
    return out


def _openmp_runtimes() -> list[str]:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    found = {ln.split()[-1] for ln in maps.splitlines() if any(lib in ln for lib in _OPENMP_LIBS) and "/" in ln}
    return sorted(found)


def _prime_torch() -> None:
    """Import what ``audit_ops`` needs now: importing it later sets env vars (TORCHINDUCTOR_CACHE_DIR)."""
    if "torch" in sys.modules:
        importlib.import_module("torch.utils._python_dispatch")
        if sys.modules["torch"].cuda.is_available():
            importlib.import_module("torch.autograd.profiler")  # audit_ops(kernels=True) uses it after the snapshot


def take_guard_snapshot() -> dict[str, Any]:
    """Identities of timing/checking functions, torch modes and flags, threads and environment, now (JSON-able)."""
    _prime_torch()
    return {
        "timers": _identities(TIMER_FUNCTIONS),
        "native_timers": native_timer_code(),
        "checkers": _identities(CHECKER_FUNCTIONS),
        "modules": {name: id(sys.modules[name]) for name in ("time", "torch", "statistics", "builtins", "math")
                    if name in sys.modules},
        "modes": _modes(),
        "flags": _torch_flags(),
        "python_threads": {str(t.native_id): t.name for t in threading.enumerate() if t.is_alive()},
        "native_threads": _native_threads(),
        "openmp_runtimes": _openmp_runtimes(),
        "harness_threads": sorted(_HARNESS_THREADS),
        "env": dict(os.environ),
        "signals": signal_state(),
        "cpu_count": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
    }


def compare_guard_snapshot(
    before: dict[str, Any],
    after: dict[str, Any],
    *,
    ignore_env: Iterable[str] = (),
    native_thread_allowance: int | None = None,
) -> list[Violation]:
    """Violations between two guard snapshots of the same process (empty = nothing changed). ``ignore_env``:
    environment variables the harness itself may change between the snapshots; ``native_thread_allowance``: new
    native threads tolerated (default none, but a newly loaded OpenMP runtime may add up to the CPU count)."""
    out: list[Violation] = []
    for key, rule, what in (("timers", "T8.runtime.timer_patched", "timing"),
                            ("checkers", "T7.runtime.checker_patched", "checking")):
        changed = [n for n, ident in before.get(key, {}).items() if after.get(key, {}).get(n, ident) != ident]
        missing = [n for n in before.get(key, {}) if n not in after.get(key, {})]
        if changed or missing:
            names = ", ".join(f"`{n}`" for n in (changed + missing)[:6])
            more = f" and {len(changed) + len(missing) - 6} more" if len(changed) + len(missing) > 6 else ""
            out.append(Violation(rule=rule, message=f"{what} function(s) {names}{more} were replaced or removed after "
                                                    "the candidate loaded; the harness's functions must stay untouched"))
    if patched := native_changes(before.get("native_timers", {}), after.get("native_timers", {})):
        out.append(Violation(rule="T8.runtime.timer_patched", message=f"native timing code changed after the "
                             f"candidate loaded: {', '.join(patched[:6])}; the process's clocks must stay untouched"))
    for name, ident in before.get("modules", {}).items():
        if after.get("modules", {}).get(name, ident) != ident:
            rule = "T8.runtime.timer_patched" if name in {"time", "statistics"} else "T7.runtime.checker_patched"
            out.append(Violation(rule=rule, message=f"module `{name}` was replaced in sys.modules"))
    for name, value in after.get("modes", {}).items():
        old = before.get("modes", {}).get(name, value)
        if value != old and (value is True or (isinstance(value, int) and value > old)):
            out.append(Violation(rule="T7.runtime.mode_installed",
                                 message=f"{name} changed from {old!r} to {value!r}: a trace hook or torch mode was "
                                         "left installed"))
    flips = [f"{name} {value!r} -> {after.get('flags', {}).get(name, value)!r}"
             for name, value in before.get("flags", {}).items() if after.get("flags", {}).get(name, value) != value]
    if flips:
        out.append(Violation(rule="T16.runtime.flag_changed",
                             message=f"torch flags changed: {'; '.join(flips[:6])}; global settings must stay as the "
                                     "harness set them"))
    ignore = set(ignore_env) | IGNORED_ENV
    env_b, env_a = before.get("env", {}), after.get("env", {})
    changed_env = sorted(k for k in set(env_b) | set(env_a) if env_b.get(k) != env_a.get(k) and k not in ignore)
    if changed_env:
        named = [k for k in changed_env if k in WATCHED_ENV] or changed_env[:8]
        out.append(Violation(rule="T16.runtime.env_changed",
                             message=f"{len(changed_env)} environment variable(s) changed: {', '.join(named)}"))
    if signals := signal_changes(before.get("signals", {}), after.get("signals", {})):
        out.append(Violation(rule="T10.runtime.signal_state",
                             message=f"signal state changed after the candidate loaded: {'; '.join(signals[:4])}; "
                                     "signal handlers and timers run code outside the timed call"))
    new_py = {tid: name for tid, name in after.get("python_threads", {}).items()
              if tid not in before.get("python_threads", {})}
    if new_py:
        out.append(Violation(rule="T10.runtime.thread_started",
                             message=f"{len(new_py)} Python thread(s) started and still alive: "
                                     f"{', '.join(sorted(new_py.values())[:5])}; background work is not allowed"))
    harness = set(after.get("harness_threads", [])) | _HARNESS_THREADS
    new_native = {tid: comm for tid, comm in after.get("native_threads", {}).items()
                  if tid not in before.get("native_threads", {}) and tid not in new_py and tid not in harness}
    allowance = native_thread_allowance
    if allowance is None:
        new_omp = set(after.get("openmp_runtimes", [])) - set(before.get("openmp_runtimes", []))
        allowance = int(after.get("cpu_count", 1)) if new_omp else 0
    if len(new_native) > allowance:
        names = sorted(set(new_native.values()))
        out.append(Violation(rule="T10.runtime.thread_started",
                             message=f"{len(new_native)} native thread(s) started and still alive (allowed: "
                                     f"{allowance}; names: {', '.join(names[:5])}); background work, and threads "
                                     "beyond the sandbox's thread budget (OMP_NUM_THREADS), are not allowed"))
    return out


# ---------------------------------------------------------------------- op audit
class OpAuditLog(list):  # type: ignore[type-arg]
    """ATen ops (``aten::name`` strings) seen during the audited block; ``kernels`` = GPU kernel names; ``casts`` =
    ``(op, from_dtype, to_dtype)`` of every copy that changed a floating dtype (``_to_copy``, ``copy_``)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: list[str] = []
        self.casts: list[tuple[str, str, str]] = []


_CAST_OPS = frozenset({"aten::_to_copy", "aten::copy_"})


def _note_cast(log: OpAuditLog, name: str, args: Any, out: Any) -> None:
    """A floating dtype change made by ``_to_copy(x) -> out`` or ``dst.copy_(src)``, kept in ``log.casts``."""
    src, dst = (args[0], out) if name == "aten::_to_copy" else (args[1] if len(args) > 1 else None, args[0])
    a, b = getattr(src, "dtype", None), getattr(dst, "dtype", None)
    if a is not None and b is not None and a != b and a.is_floating_point and b.is_floating_point:
        log.casts.append((name.split("::")[-1], str(a).removeprefix("torch."), str(b).removeprefix("torch.")))


@contextlib.contextmanager
def audit_ops(*, kernels: bool | None = None) -> Iterator[OpAuditLog]:
    """Record every ATen op dispatched inside the block (a ``TorchDispatchMode``), and on CUDA the kernels run.

    Ops called from C++ (``at::_ops::*::call``) go through the dispatcher and are seen as well.

    :param kernels: also record GPU kernel names with a Kineto profiler (default: when CUDA is available). It is
        not ``torch.profiler.profile``: that wrapper's start imports torch._inductor, seconds of every runner's start
        (``harness.profiling.kineto_profile``).
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    log = OpAuditLog()

    def record(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = str(func._schema.name)
        log.append(name)
        out = func(*args, **(kwargs or {}))
        if name in _CAST_OPS:
            _note_cast(log, name, args, out)
        return out

    class _Recorder(TorchDispatchMode):
        pass

    # Set after the class exists: TorchDispatchMode.__init_subclass__ wraps a subclass's own __torch_dispatch__ in
    # torch._disable_dynamo, whose first call imports torch._dynamo (1.2-2.2 CPU s of every runner's start on a CPU
    # host; on the H200 the audit warm-up, profiler start included, was 5.2-6.2 CPU s). Candidates cannot reach
    # torch.compile (T1.python.dynamic_code), so there is no compiled frame for the wrapper to keep out of the
    # recorder.
    _Recorder.__torch_dispatch__ = record  # type: ignore[method-assign]

    want_kernels = torch.cuda.is_available() if kernels is None else kernels
    if not want_kernels:
        with _Recorder():
            yield log
        return
    from cuda_agent.harness.profiling import kineto_profile

    prof = kineto_profile(cpu=False, cuda=True)
    # Threads the profiler itself starts (CUPTI/Kineto) are the harness's, not the candidate's.
    start = set(_native_threads())
    prof.__enter__()
    _HARNESS_THREADS.update(set(_native_threads()) - start)
    try:
        with _Recorder():
            yield log
        torch.cuda.synchronize()
    finally:
        stop = set(_native_threads())
        prof.__exit__(None, None, None)
        _HARNESS_THREADS.update(set(_native_threads()) - stop)
    log.kernels.extend(e.name for e in prof.function_events if str(getattr(e, "device_type", "")).endswith("CUDA"))


#: ATen ops allowed during forward: allocation, views, copies, metadata.
ALLOWED_RUNTIME_OPS: frozenset[str] = frozenset(
    """empty empty_like empty_strided zeros zeros_like ones ones_like full full_like new_empty new_empty_strided
    new_zeros new_ones new_full view _unsafe_view _reshape_alias reshape as_strided contiguous clone copy_ _to_copy
    to t transpose permute expand unsqueeze squeeze select slice narrow detach alias resize_ zero_ fill_ flatten
    unflatten view_as expand_as reshape_as split split_with_sizes chunk unbind _local_scalar_dense item lift_fresh
    movedim swapaxes unfold sym_size sym_stride sym_numel sym_storage_offset is_contiguous set_ record_stream
    _has_compatible_shallow_copy_type is_same_size""".split()
)


def normalize_op(op: str) -> str:
    """``aten::add.Tensor`` / ``aten.add.Tensor`` / ``add`` -> ``add``; other namespaces keep ``ns::name``."""
    if "::" in op:
        ns, rest = op.split("::", 1)
        name = rest.split(".")[0]
        return name if ns == "aten" else f"{ns}::{name}"
    if op.startswith("aten."):
        return op.split(".")[1]
    return op.split(".")[0]


def op_audit_violations(ops: Iterable[str], kind: str, casts: Iterable[tuple[str, str, str]] = (),
                        floor: str | None = None) -> list[Violation]:
    """Ops outside the allocation/view/copy allowlist, one violation per distinct op (``T1.runtime.aten_compute``),
    and copies that cast below the precision of the forward's inputs (``T15.runtime.dtype_cast``).

    :param casts: ``OpAuditLog.casts``.
    :param floor: the least precise floating dtype among the forward's inputs (``"float32"``); a cast to a dtype less
        precise than both its source and ``floor`` drops precision (float32 -> float16 on float32 inputs), while a
        no-op ``x.float()``, a widening, or a cast back to an fp16 input's dtype does not.
    """
    seen: dict[str, int] = {}
    for op in ops:
        name = normalize_op(str(op))
        if name not in ALLOWED_RUNTIME_OPS:
            seen[name] = seen.get(name, 0) + 1
    found = [
        Violation(rule="T1.runtime.aten_compute",
                  message=f"PyTorch op `{name}` ran {count}x during forward on {kind}; only the extension's own "
                          "kernels may compute (allocation, views and copies are allowed)")
        for name, count in seen.items()
    ]
    for op, src, dst in dict.fromkeys(tuple(c) for c in casts):
        if _eps(dst) > _eps(src) and _eps(dst) > _eps(floor or "float32"):
            found.append(Violation(rule="T15.runtime.dtype_cast",
                                   message=f"`{op}` cast a tensor from {src} to {dst} during forward on {kind}, below "
                                           f"the inputs' precision ({floor or 'float32'}); compute in the inputs' "
                                           "dtype"))
    return found


def _eps(dtype: str) -> float:
    """Machine epsilon of a floating dtype named like ``float16`` (unknown names: float32's)."""
    import torch

    dt = getattr(torch, dtype.removeprefix("torch."), None)
    return float(torch.finfo(dt).eps) if isinstance(dt, torch.dtype) and dt.is_floating_point else 2.0 ** -23


__all__ = [
    "ALLOWED_RUNTIME_OPS",
    "CHECKER_FUNCTIONS",
    "OpAuditLog",
    "TIMER_FUNCTIONS",
    "audit_ops",
    "base_kernel_name",
    "compare_guard_snapshot",
    "kernel_origin_violations",
    "normalize_op",
    "op_audit_violations",
    "take_guard_snapshot",
]

