"""The native code the timer reads, watched from the runner's guard snapshot (T8).

The guard compares the *Python* identities of the timing functions (``time.perf_counter``, ``Event.elapsed_time``
...). Native code in the candidate's process can leave those objects alone and rewrite what they run instead: a
jump written over the first bytes of libc's ``clock_gettime`` (seen in session 36's red team: an honest but slow
swish read 16x faster than eager, reward 3, on the CPU backend), a patched vDSO, a swapped C function pointer of a
builtin. :func:`native_timer_code` records, for the snapshot, a digest of the first :data:`CODE_BYTES` bytes of each
native function a host or device time passes through:

- libc's clocks (``clock_gettime`` and its neighbours), resolved in the process's global namespace;
- the whole vDSO image (the kernel's ``clock_gettime`` that libc calls), from ``/proc/self/maps``;
- the C functions behind CPython's ``time.perf_counter`` and friends (their ``PyMethodDef`` pointers, and the code
  there);
- the CUDA runtime's and driver's event and synchronize calls, where those libraries are loaded already (nothing
  is loaded here).

:func:`native_changes` names what differs between two snapshots. A patch has to stay in place from the end of the
candidate's call until the timer reads its clock, so the guard that runs after the calls (the session's closing
guard, on the runner's main thread, with no candidate code running) sees it. The static rules (``mprotect``,
``/proc`` paths, raw machine code in ``asm``, the cycle counter) and the binary rules (memory protection, file
streams) refuse the usual means of writing code in the first place; this is the check behind them.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
from typing import Any

#: Bytes hashed at each function's entry (a jump patch needs 5 to 14).
CODE_BYTES = 32
#: libc functions a host clock reads.
LIBC_CLOCKS = ("clock_gettime", "gettimeofday", "clock_getres", "time", "clock", "timespec_get")
#: CPython's builtin time functions (module attribute names).
PY_TIME_FUNCTIONS = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
                     "process_time", "thread_time")
#: (library soname prefixes, functions): CUDA's event and synchronize calls, watched when already loaded.
CUDA_LIBRARIES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("libcudart.so.13", "libcudart.so.12", "libcudart.so"),
     ("cudaEventElapsedTime", "cudaEventRecord", "cudaEventSynchronize", "cudaEventQuery", "cudaDeviceSynchronize",
      "cudaStreamSynchronize")),
    (("libcuda.so.1", "libcuda.so"),
     ("cuEventElapsedTime", "cuEventElapsedTime_v2", "cuEventRecord", "cuEventSynchronize", "cuCtxSynchronize",
      "cuStreamSynchronize")),
)


def _digest(addr: int | None, size: int = CODE_BYTES) -> str | None:
    if not addr:
        return None
    return hashlib.sha256(ctypes.string_at(addr, size)).hexdigest()[:16]


def _address(lib: Any, name: str) -> int | None:
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except (AttributeError, ValueError):
        return None


def _loaded(names: tuple[str, ...]) -> Any | None:
    """The first of ``names`` that this process has loaded already (``RTLD_NOLOAD``: nothing new is loaded)."""
    flags = getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LAZY", 0)
    for name in names:
        try:
            return ctypes.CDLL(name, mode=flags)
        except OSError:
            continue
    return None


def _vdso() -> str | None:
    """A digest of the whole vDSO image, or None where there is none (not Linux)."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                if line.rstrip().endswith("[vdso]"):
                    start, end = (int(x, 16) for x in line.split()[0].split("-"))
                    return _digest(start, end - start)
    except OSError:
        return None
    return None


def _builtin_c_function(fn: Any) -> int | None:
    """The C function pointer behind a CPython builtin function object (``PyCFunctionObject.m_ml->ml_meth``)."""
    if type(fn).__name__ != "builtin_function_or_method":
        return None
    method_def = ctypes.c_void_p.from_address(id(fn) + 2 * ctypes.sizeof(ctypes.c_void_p)).value
    if not method_def:
        return None
    return ctypes.c_void_p.from_address(method_def + ctypes.sizeof(ctypes.c_void_p)).value


#: torch's C entry points of device timing (dotted from ``torch._C``): builtins and methods whose ``PyMethodDef``
#: pointer a native write could swap without touching the Python objects the guard compares.
TORCH_C_TIMERS = ("_cuda_synchronize", "_CudaEventBase.elapsed_time", "_CudaEventBase.record",
                  "_CudaEventBase.synchronize", "_CudaEventBase.query")


def _descriptor_c_function(fn: Any) -> int | None:
    """The C function behind a builtin method descriptor (``PyMethodDescrObject.d_method->ml_meth``)."""
    if type(fn).__name__ != "method_descriptor":
        return None
    word = ctypes.sizeof(ctypes.c_void_p)
    method_def = ctypes.c_void_p.from_address(id(fn) + 5 * word).value  # after the header, d_type, d_name, d_qualname
    return ctypes.c_void_p.from_address(method_def + word).value if method_def else None


def _torch_c_timers() -> dict[str, str]:
    torch_c = getattr(sys.modules.get("torch"), "_C", None)
    out = {}
    for dotted in TORCH_C_TIMERS if torch_c is not None else ():
        obj: Any = torch_c
        for part in dotted.split("."):
            obj = getattr(obj, part, None)
        c_fn = _builtin_c_function(obj) or _descriptor_c_function(obj)
        if c_fn:
            out[f"torch._C.{dotted}"] = f"{c_fn:x}:{_digest(c_fn)}"
    return out


def native_timer_code() -> dict[str, str]:
    """``{where: digest}`` of the native timing code of this process now (see the module docstring); a function
    that cannot be resolved here is left out."""
    out: dict[str, str | None] = {}
    libc = ctypes.CDLL(None)
    for name in LIBC_CLOCKS:
        out[f"libc:{name}"] = _digest(_address(libc, name))
    out["vdso"] = _vdso()
    time_module = sys.modules.get("time")
    for name in PY_TIME_FUNCTIONS if time_module is not None else ():
        c_fn = _builtin_c_function(getattr(time_module, name, None))
        if c_fn:
            out[f"python:time.{name}"] = f"{c_fn:x}:{_digest(c_fn)}"
    for sonames, functions in CUDA_LIBRARIES:
        lib = _loaded(sonames)
        for name in functions if lib is not None else ():
            out[f"{sonames[0]}:{name}"] = _digest(_address(lib, name))
    out.update(_torch_c_timers())
    return {k: v for k, v in out.items() if v is not None}


def native_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The watched native functions whose code (or C pointer) differs between two readings, or that vanished."""
    return [k for k, v in before.items() if after.get(k) != v]
