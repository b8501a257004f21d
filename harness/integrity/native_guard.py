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


#: Loaded objects whose GOT slots for the watched functions are read (basename prefixes): the interpreter and
#: torch's CUDA libraries, the callers of the clocks and the event calls the timer reads through.
GOT_OBJECTS = ("python", "libpython", "libtorch_cuda", "libc10_cuda", "libtorch_python")
#: A relocation section larger than this is read only when it is the PLT's (a big library's .rela.dyn is mostly
#: relative relocations, and its calls go through the PLT).
MAX_RELA_BYTES = 4 << 20
_ELF_CACHE: dict[tuple[str, float, frozenset[str]], list[tuple[str, int, int]]] = {}


def _elf_slots(path: str, names: frozenset[str]) -> list[tuple[str, int, int]]:
    """(symbol, GOT offset from the first load segment's address, that segment's page-aligned vaddr) of every
    JUMP_SLOT/GLOB_DAT relocation against ``names`` in the x86-64 ELF ``path``; cached per file, mtime and names."""
    import struct

    key = (path, os.stat(path).st_mtime, names)
    if key in _ELF_CACHE:
        return _ELF_CACHE[key]
    out: list[tuple[str, int, int]] = []
    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1 or struct.unpack_from("<H", head, 18)[0] != 62:
            _ELF_CACHE[key] = out
            return out
        phoff, shoff = struct.unpack_from("<QQ", head, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 54)
        fh.seek(phoff)
        phdrs = [struct.unpack_from("<IIQQ", fh.read(phentsize)) for _ in range(phnum)]
        first_load = min((vaddr for ptype, _, off, vaddr in phdrs if ptype == 1 and off == 0), default=0) & ~0xFFF
        fh.seek(shoff)
        sections = [struct.unpack_from("<IIQQQQIIQQ", fh.read(shentsize)) for _ in range(shnum)]

        def read(sec: tuple) -> bytes:
            fh.seek(sec[4])
            return fh.read(sec[5])

        dynsym_index = next((i for i, sec in enumerate(sections) if sec[1] == 11), None)
        if dynsym_index is not None:
            dynsym, dynstr = read(sections[dynsym_index]), read(sections[sections[dynsym_index][6]])
            wanted = {}
            for i, (st_name,) in enumerate(struct.iter_unpack("<I20x", dynsym)):
                end = dynstr.find(b"\0", st_name)
                name = dynstr[st_name:end].decode(errors="replace")
                if name in names:
                    wanted[i] = name
            for sec in sections:
                if sec[1] != 4 or sec[6] != dynsym_index or not wanted:
                    continue
                if sec[5] > MAX_RELA_BYTES and not sec[7]:  # sh_info names the PLT's section for .rela.plt
                    continue
                for r_offset, r_info, _ in struct.iter_unpack("<QQq", read(sec)):
                    if r_info >> 32 in wanted and r_info & 0xFFFFFFFF in (6, 7):
                        out.append((wanted[r_info >> 32], r_offset, first_load))
    _ELF_CACHE[key] = out
    return out


def _resolved(names: frozenset[str]) -> dict[str, int]:
    """Where the dynamic linker resolves each of ``names`` in the global namespace (libc's clocks) or in the CUDA
    libraries already loaded: what a bound GOT slot holds."""
    out = {}
    libs = [ctypes.CDLL(None)] + [lib for sonames, _ in CUDA_LIBRARIES if (lib := _loaded(sonames)) is not None]
    for name in names:
        for lib in libs:
            addr = _address(lib, name)
            if addr:
                out[name] = addr
                break
    return out


def got_slot_addresses(names: frozenset[str]) -> dict[str, int]:
    """``{object:symbol@offset: slot address}`` of the GOT slots of ``names`` in the loaded objects of
    :data:`GOT_OBJECTS`."""
    bases: dict[str, int] = {}
    readable: dict[str, list[tuple[int, int]]] = {}  # each object's readable mappings: a slot is read only inside one
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 6 or not parts[5].startswith("/"):
                    continue
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if int(parts[2], 16) == 0:
                    bases.setdefault(parts[5], lo)
                if parts[1].startswith("r"):
                    readable.setdefault(parts[5], []).append((lo, hi))
    except OSError:
        return {}
    out = {}
    for path, start in bases.items():
        if not os.path.basename(path).startswith(GOT_OBJECTS):
            continue
        try:
            slots = _elf_slots(path, names)
        except (OSError, ValueError, IndexError):
            continue
        for name, r_offset, first_load in slots:
            addr = start - first_load + r_offset
            if any(lo <= addr and addr + 8 <= hi for lo, hi in readable.get(path, ())):
                out[f"{os.path.basename(path)}:{name}@{r_offset:x}"] = addr
    return out


def _got_slots(names: frozenset[str]) -> dict[str, str]:
    """``{object:symbol@offset: "held>resolved"}``: what each watched GOT slot holds and where the linker resolves
    its symbol (a slot rewritten to the candidate's own clock leaves every function's code intact)."""
    resolved = _resolved(names)
    return {k: f"{ctypes.c_void_p.from_address(addr).value or 0:x}>{resolved.get(k.split(':', 1)[1].split('@')[0], 0):x}"
            for k, addr in got_slot_addresses(names).items()}


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
    watched = frozenset(LIBC_CLOCKS) | frozenset(f for _, functions in CUDA_LIBRARIES for f in functions)
    out.update({f"got:{k}": v for k, v in _got_slots(watched).items()})
    return {k: v for k, v in out.items() if v is not None}


def native_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The watched native functions whose code (or C pointer) differs between two readings, or that vanished. A GOT
    slot may change once, from its PLT stub to the function the linker resolves (lazy binding): it counts only when
    it then holds anything else."""
    changed = []
    for k, v in before.items():
        now = after.get(k)
        if now == v:
            continue
        if k.startswith("got:") and now is not None and now.split(">")[0] == now.split(">")[1]:
            continue
        changed.append(k)
    return changed
