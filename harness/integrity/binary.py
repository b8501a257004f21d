"""Binary rules: what the built extension imports (``nm -D --undefined-only``), THREATS.md 1, 9, 10, 20, 23.

Whatever the sources hide (macros, ADL, tensor operators in C++), a call into
ATen compute, cuBLAS, the dispatcher or Python's import machinery must end up
as an undefined dynamic symbol of the built ``.so``. The shared prebuilt
binding object (``binding.cpp``) is linked into every module, so its own
imports are subtracted: pass ``baseline`` (the undefined symbols of a module
built from an EMPTY workspace, see ``baseline_symbols``), or register one per
backend kind with ``register_baseline``. Python C-API symbols that pybind11
itself needs in every module (``PYBIND_RUNTIME_SYMBOLS``) are always allowed;
calls to those from kernel code are a source rule (``T1.cpp.python_api``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.harness.integrity.python_attribution import PYTHON_API_PATTERN, machinery_python_symbols, python_call_sites
from cuda_agent.harness.integrity.violation import Violation

#: ATen operators an extension may call: allocation, views, copies, metadata (matched as op or op_<overload>).
ALLOWED_ATEN_OPS: frozenset[str] = frozenset(
    """empty empty_like empty_strided zeros zeros_like ones ones_like full full_like new_empty new_empty_strided
    new_zeros new_ones new_full view _reshape_alias reshape as_strided contiguous clone copy_ _to_copy to t
    transpose permute expand unsqueeze squeeze select slice narrow detach alias resize_ zero_ fill_ flatten unflatten
    view_as expand_as reshape_as split chunk unbind item _local_scalar_dense lift_fresh movedim swapaxes unfold
    record_stream sym_size sym_stride sym_numel sym_storage_offset is_contiguous set_""".split()
)

#: Python C-API symbols pybind11 references in every module it builds (measured on an empty pybind module).
PYBIND_RUNTIME_SYMBOLS: frozenset[str] = frozenset(
    """PyEval_AcquireThread PyEval_GetBuiltins PyEval_SaveThread PyEval_RestoreThread PyFrame_GetBack PyFrame_GetCode
    PyFrame_GetLineNumber PyObject_CallFunctionObjArgs PyObject_GetAttrString PyObject_HasAttrString
    PyObject_SetAttrString PyObject_GetItem PyObject_SetItem PyObject_IsInstance PyObject_Repr PyObject_Str""".split()
)

#: (rule, demangled-name regex, message). Checked in order; the first match names the rule.
SYMBOL_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (rule, re.compile(rx), msg)
    for rule, rx, msg in (
        ("T1.binary.dispatcher", r"^c10::Dispatcher::|findSchema|c10::OperatorHandle|callBoxed|c10::impl::OperatorEntry|"
         r"^torch::Library::|c10::RegisterOperators|torch::RegisterOperators", "dispatcher lookups/registrations"),
        ("T1.binary.aten_kernel", r"^at::(native|cpu|meta|compositeexplicitautograd\w*|compositeimplicitautograd\w*)::",
         "direct ATen kernel calls"),
        ("T1.binary.jit", r"^torch::jit::|^torch::autograd::(Engine|backward|grad)\b|^torch::autograd::profiler",
         "TorchScript/autograd engine entry points"),
        ("T1.binary.dynamic_loading", r"^(dlopen|dlsym|dlvsym|dlmopen|dlinfo|dl_iterate_phdr|dladdr1?|getauxval|"
         r"_r_debug|_dl_\w+|cuModuleLoad\w*|cuLibraryLoad\w*|"
         r"cudaLibraryLoad\w*|cuGetProcAddress\w*|cudaGetDriverEntryPoint\w*|cuModuleGetFunction)$",
         "loading code at run time"),
        ("T1.binary.python_api", PYTHON_API_PATTERN, "Python import/eval/call/attribute APIs"),
        ("T6.binary.introspection", r"^(backtrace|backtrace_symbols\w*|_Unwind_Backtrace|_Unwind_GetIP\w*|"
         r"_Unwind_GetCFA|_U\w+_step|_U\w+_init_local\w*|unw_\w+)$", "stack walking (who called the kernel)"),
        ("T8.binary.clock", r"^(clock|clock_gettime|__clock_gettime\w*|clock_getres|clock_getcpuclockid|gettimeofday|"
         r"time|times|getrusage|sysinfo|timespec_get|ftime|pthread_getcpuclockid|omp_get_wtime|omp_get_wtick)$|"
         r"^std::chrono::.*::now\(|^c10::(getTime|getApproximateTime|ApproximateClock)",
         "clocks (a kernel that reads the time can tell an audited or checked call from the others)"),
        ("T9.binary.stream", r"^(cudaStreamCreate\w*|cuStreamCreate\w*|cudaStreamBeginCapture\w*|cudaGraph\w*|"
         r"cuGraph\w*)$|c10::cuda::getStreamFromPool|c10::cuda::getStreamFromExternal|c10::cuda::setCurrentCUDAStream",
         "stream/graph creation"),
        ("T20.binary.l2_persistence", r"^(cudaCtxResetPersistingL2Cache|cuCtxResetPersistingL2Cache|"
         r"cudaStreamSetAttribute|cuStreamSetAttribute|cudaDeviceSetLimit|cuCtxSetLimit|"
         r"cudaGraphKernelNodeSetAttribute)$", "persisting-L2 controls"),
        ("T10.binary.thread", r"^(pthread_create|fork|vfork|clone|clone3|posix_spawn\w*)$|"
         r"^std::thread::_M_start_thread|^cudaLaunchHostFunc$|^cudaStreamAddCallback$", "thread/process creation"),
        ("T10.binary.signal", r"^(signal|sigaction|__sigaction|sigset|sigvec|bsd_signal|sysv_signal|__sysv_signal|"
         r"ssignal|setitimer|getitimer|alarm|ualarm|timer_create|timer_settime|timerfd_create|timerfd_settime|"
         r"sigaltstack|sigprocmask|pthread_sigmask|raise|sigqueue|pthread_kill|tgkill|sigsuspend|sigwait\w*|"
         r"signalfd|setcontext|swapcontext|makecontext)$", "signal handlers and timers (host work outside the call)"),
        ("T11.binary.tensor_construction", r"^c10::(TensorImpl|StorageImpl)::(TensorImpl|StorageImpl)\(|"
         r"^at::TensorMaker::|^at::from_blob\b|^at::for_blob\b|^c10::make_intrusive<c10::(TensorImpl|StorageImpl)",
         "hand-made tensor/storage constructors (memory and deleters the harness does not own)"),
        ("T23.binary.system_call", r"^(system|popen|execl|execlp|execle|execv|execvp|execvpe|execve|fexecve|socket|"
         r"connect|bind|listen|accept|accept4|ptrace|syscall|kill|setenv|putenv|unsetenv|getenv|secure_getenv|prctl|"
         r"fopen|fopen64|freopen|fdopen|open|open64|openat|openat64|__open_2|__open64_2|__openat_2|__openat64_2|"
         r"open_by_handle_at|creat|mmap|mmap64|mprotect|pkey_mprotect|pkey_alloc|pkey_set|mremap|madvise|"
         r"memfd_create|shm_open|unlink|rename|process_vm_readv|process_vm_writev|chroot|setuid)$|"
         r"^std::(__cxx11::)?basic_(i|o)?fstream<|^std::basic_filebuf<.*>::open\b",
         "system, process, network, environment, memory-protection or file calls"),
    )
)

_VENDOR_SYMBOLS: dict[str, re.Pattern[str]] = {
    "cublas": re.compile(r"^cublas\w*|at::cuda::getCurrentCUDABlasHandle|at::cuda::getCurrentCUDABlasLtHandle"),
    "cudnn": re.compile(r"^cudnn\w*|at::native::getCudnnHandle"),
    "cusparse": re.compile(r"^cusparse\w*"),
    "cusolver": re.compile(r"^cusolver\w*"),
    "cufft": re.compile(r"^cufft\w*"),
    # CPU BLAS/LAPACK under any spelling libtorch_cpu.so exports (MKL: sgemm, SGEMM, sgemm_64, sgemm_batch ...;
    # cblas_*, mkl_*/MKL_*, oneDNN, OpenBLAS, fbgemm::): an imported routine of these names is a vendor library (the
    # CUDA libraries' own gemms, cublas*/cusparse*..., belong to their families above)
    "cblas": re.compile(r"(?i)^(cblas_\w+|mkl\w*|dnnl\w*|mkldnn\w*|openblas\w*|lapacke?_\w+|(?!cu)\w*gemm\w*|"
                        r"i?[sdcz]{1,2}(gemv|symm|hemm|syrk|herk|syr2k|her2k|trmm|trsm|trmv|trsv|ger[uc]?|axpby|axpy|"
                        r"dot[uc]?|scal|nrm2|asum|amax|amin|copy|swap|rotg?|rotmg?|symv|hemv|sbmv|spmv|gbmv|tbmv|tpmv|"
                        r"getr[fsi]|potr[fsi]|gesv|gesvd|gesdd|geqrf|syevd?|heevd?|gels)(_batch\w*|_64|_)*)$|"
                        r"^(fbgemm|dnnl|mkldnn|ideep|oneapi::mkl|Eigen)::"),
}

_OP_RE = re.compile(r"^at::_ops::(\w+)::(call|redispatch)\b")

_baselines: dict[str, frozenset[str]] = {}


@dataclass(frozen=True)
class Symbol:
    """One undefined dynamic symbol: raw (mangled, version stripped) and demangled."""

    raw: str
    name: str


def _run(cmd: list[str], stdin: str | None = None) -> str:
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}")
    return proc.stdout


def demangle(names: list[str]) -> list[str]:
    """Demangle C++ names in one ``c++filt`` call (identity where c++filt is absent)."""
    if not names or shutil.which("c++filt") is None:
        return list(names)
    out = _run(["c++filt"], "\n".join(names) + "\n").split("\n")
    return out[: len(names)] if len(out) >= len(names) else list(names)


#: Undefined symbols per (file content sha256, dynamic): a file nm has read is not read again (verify and
#: profile rebuild a no-op and re-check the same module; the shared binding object is the same every time).
_SYMBOL_CACHE: dict[tuple[str, bool], tuple[Symbol, ...]] = {}
_SYMBOL_CACHE_MAX = 256
_SYMBOL_CACHE_LOCK = threading.Lock()


def undefined_symbols(so_path: Path, *, dynamic: bool = True) -> list[Symbol]:
    """Undefined symbols of a shared object (``nm -D --undefined-only``) or, with ``dynamic=False``, of an object file.

    Memoised by the file's content hash (never by name or mtime), so a changed file is always read again.
    """
    try:
        key = (hashlib.sha256(Path(so_path).read_bytes()).hexdigest(), dynamic)
    except OSError:  # unreadable: nm reports it
        return _read_undefined_symbols(so_path, dynamic=dynamic)
    with _SYMBOL_CACHE_LOCK:
        cached = _SYMBOL_CACHE.get(key)
    if cached is not None:
        return list(cached)
    symbols = _read_undefined_symbols(so_path, dynamic=dynamic)
    with _SYMBOL_CACHE_LOCK:
        if len(_SYMBOL_CACHE) >= _SYMBOL_CACHE_MAX:
            _SYMBOL_CACHE.pop(next(iter(_SYMBOL_CACHE)))
        _SYMBOL_CACHE[key] = tuple(symbols)
    return symbols


def _read_undefined_symbols(so_path: Path, *, dynamic: bool) -> list[Symbol]:
    if shutil.which("nm") is None:
        raise RuntimeError("`nm` (binutils) is not on PATH; the binary integrity check needs it")
    raw = []
    cmd = ["nm", "-D", "--undefined-only", str(so_path)] if dynamic else ["nm", "--undefined-only", str(so_path)]
    for line in _run(cmd).splitlines():
        parts = line.split()
        if parts:
            raw.append(parts[-1].split("@")[0])
    return [Symbol(r, d) for r, d in zip(raw, demangle(raw), strict=True)]


def defined_symbols(so_path: Path) -> list[str]:
    """Demangled names of functions defined in a shared object (static table, else dynamic)."""
    names: list[str] = []
    for args in (["nm", "--defined-only", str(so_path)], ["nm", "-D", "--defined-only", str(so_path)]):
        try:
            out = _run(args)
        except RuntimeError:
            continue
        names = [ln.split()[-1].split("@")[0] for ln in out.splitlines() if len(ln.split()) >= 3]
        if names:
            break
    return demangle(names)


def register_baseline(kind: str, symbols: Iterable[str]) -> None:
    """Set the symbols of the shared binding object for ``kind`` (raw names), used when ``check_binary`` gets none."""
    _baselines[kind] = frozenset(symbols)


def baseline_symbols(so_path: Path) -> frozenset[str]:
    """Raw undefined symbols of a module built from an empty workspace: the shared binding's own imports."""
    return frozenset(s.raw for s in undefined_symbols(so_path))


def binding_object_baseline(so_path: Path) -> frozenset[str]:
    """Undefined symbols of the shared binding object linked into ``so_path`` (found in its ``build.ninja``)."""
    out: set[str] = set()
    for obj in _binding_objects(so_path):
        out |= {s.raw for s in undefined_symbols(obj, dynamic=False)}
    return frozenset(out)


def _op_allowed(op: str) -> bool:
    if op in ALLOWED_ATEN_OPS:
        return True
    return any(op.startswith(name + "_") for name in ALLOWED_ATEN_OPS)


#: ``at::`` symbols (other than ``at::_ops``) a module may import: tensor accessors, the current stream,
#: device facts, parallel_for's helpers. Any other ``at::`` import is a direct ATen kernel or helper call.
ALLOWED_AT_PREFIXES: tuple[str, ...] = (
    "at::TensorBase::", "at::Tensor::", "at::cuda::getCurrentCUDAStream", "at::cuda::getDefaultCUDAStream",
    "at::cuda::getCurrentDeviceProperties", "at::cuda::getDeviceProperties", "at::cuda::warp_size",
    "at::cuda::getNumGPUs", "at::cuda::current_device", "at::cuda::device_count", "at::cuda::detail::",
    "at::detail::", "at::internal::", "at::get_num_threads", "at::get_thread_num", "at::in_parallel_region",
    "at::init_num_threads", "at::toString", "at::TensorOptions", "at::TensorArg", "at::check", "at::checkDim",
    "at::checkSameGPU", "at::checkAllSameGPU", "at::checkContiguous", "at::checkScalarType", "at::TensorGeometry",
)
_DECORATION_RE = re.compile(r"^(vtable for |typeinfo for |typeinfo name for |VTT for |guard variable for )")
_RETURN_TYPE_RE = re.compile(r"^[\w:<>,* ]+?\s(?=at::)")


def _aten_helper(name: str) -> bool:
    """True for an ``at::`` import outside the allowlist (return types and vtable decorations stripped)."""
    bare = _DECORATION_RE.sub("", name)
    bare = _RETURN_TYPE_RE.sub("", bare) if not bare.startswith("at::") else bare
    if not bare.startswith("at::") or bare.startswith("at::_ops::"):
        return False
    return not bare.startswith(ALLOWED_AT_PREFIXES)


def classify_symbol(sym: Symbol, allowed_libraries: frozenset[str]) -> tuple[str, str] | None:
    """Rule and message for one imported symbol (None = allowed)."""
    name = sym.name
    m = _OP_RE.match(name)
    if m:
        if _op_allowed(m.group(1)):
            return None
        return "T1.binary.aten_op", f"imports ATen operator `{m.group(1)}` (at::_ops::{m.group(1)}); only allocation/" \
                                    "view/copy operators may be called, the compute must be your kernel"
    for lib, rx in _VENDOR_SYMBOLS.items():
        if lib not in allowed_libraries and rx.search(name):
            return "T1.binary.vendor_library", f"imports `{name[:80]}` from {lib}, which the skill does not allow"
    if sym.raw in PYBIND_RUNTIME_SYMBOLS:
        return None
    for rule, rx, what in SYMBOL_RULES:
        if rx.search(name) or rx.search(sym.raw):
            return rule, f"imports `{name[:100]}` ({what})"
    if _aten_helper(name):
        return "T1.binary.aten_kernel", (f"imports `{name[:100]}`, an ATen function outside the allowlist "
                                         "(tensor accessors, current stream, device facts)")
    return None


def check_binary(
    so_path: Path,
    kind: str,
    *,
    baseline: Iterable[str] | None = None,
    allowed_libraries: Iterable[str] = (),
) -> list[Violation]:
    """Violations among the undefined symbols of the built extension ``so_path``.

    :param so_path: the built ``cuda_extension`` shared object.
    :param kind: backend kind (``"cpu"``/``"cuda"``): selects the registered baseline.
    :param baseline: raw symbols to ignore (the shared binding object's); default: ``register_baseline(kind, ...)``.
    :param allowed_libraries: vendor libraries the skill allows (``"cublas"``, ``"cudnn"``...).
    """
    so_path = Path(so_path)
    if not so_path.is_file():
        raise FileNotFoundError(f"check_binary: built module {so_path} does not exist (pass BuildOutcome.so_path)")
    allowed = frozenset(allowed_libraries)
    if baseline is not None:
        ignore = frozenset(baseline)
    else:
        ignore = _baselines.get(kind, frozenset()) | binding_object_baseline(so_path) | toolchain_link_baseline(so_path)
    objects = candidate_objects(so_path)
    # Python API symbols that only pybind11's/torch's own code in the candidate's objects references
    # (casters, cpp_function dispatchers of a release-style binding) are machinery, not the candidate's
    # calls; references from the candidate's own functions are reported per object below.
    machinery = {obj: machinery_python_symbols(obj) for obj in objects if _has_python_symbols(obj)}
    found = _judge(undefined_symbols(so_path), ignore | frozenset().union(*machinery.values()), allowed, so_path.name)
    # What the toolchain's own static runtime imports is subtracted above, so a
    # candidate calling the same libc function directly must be caught in its
    # own object files, which hold no static-runtime code.
    seen = {(v.rule, v.message.split(": ", 1)[-1]) for v in found}
    for obj in objects:
        where = f"{so_path.name}:{obj.name}"
        for v in _judge(undefined_symbols(obj, dynamic=False), machinery.get(obj, frozenset()), allowed, where):
            if (v.rule, v.message.split(": ", 1)[-1]) not in seen:
                found.append(v)
        if obj in machinery:
            found.extend(_call_site_violations(obj, where, seen))
    return found


def _has_python_symbols(obj: Path) -> bool:
    """True when the object imports any Python C-API symbol (only those objects need attribution)."""
    return any(s.raw.startswith(("Py", "_Py", "THP")) for s in undefined_symbols(obj, dynamic=False))


def _call_site_violations(obj: Path, where: str, seen: set[tuple[str, str]]) -> list[Violation]:
    """The candidate's own references to Python APIs or pybind11 call entries, naming the function holding each."""
    out = []
    for site in python_call_sites(obj, PYBIND_RUNTIME_SYMBOLS):
        message = (f"`{site.owner[:100]}` references `{site.target[:100]}` (a call into Python from your own code; "
                   "pybind11 may only register your C++ functions)")
        if ("T1.binary.python_api", message) not in seen:
            seen.add(("T1.binary.python_api", message))
            out.append(Violation(rule="T1.binary.python_api", message=message, file=where))
    return out


def _ninja_vars(so_path: Path) -> tuple[dict[str, str], list[Path]]:
    """Variables (``cxx``, ``ldflags``) and object paths of the ``build.ninja`` beside ``so_path``."""
    ninja = Path(so_path).parent / "build.ninja"
    if not ninja.is_file():
        return {}, []
    variables: dict[str, str] = {}
    objects: list[Path] = []
    for line in ninja.read_text(errors="replace").splitlines():
        m = re.match(r"^(cxx|ldflags) = (.*)$", line)
        if m:
            variables[m.group(1)] = m.group(2)
        m = re.match(r"^build (\S+\.o): (?:cxx|nvcc) ", line)
        if m:
            objects.append(Path(m.group(1).replace("$:", ":")))
    return variables, objects


def candidate_objects(so_path: Path) -> list[Path]:
    """The candidate's own object files (kernels and bindings) linked into ``so_path``."""
    return [o for o in _ninja_vars(so_path)[1] if o.is_file()]


def toolchain_link_baseline(so_path: Path) -> frozenset[str]:
    """Undefined symbols of the shared binding object linked ALONE with the same toolchain and flags.

    Some toolchains link the C++ runtime statically (seen on the H200 image's
    /opt/gcc: no libstdc++.so NEEDED, and its libc imports ``open``,
    ``fopen64``, ``syscall``, ``secure_getenv`` in every module). Those imports
    belong to the toolchain, not the candidate. Cached beside the binding object.
    """
    variables, _ = _ninja_vars(so_path)
    binding = next(iter(sorted(_binding_objects(so_path))), None)
    if binding is None or "cxx" not in variables:
        return frozenset()
    key = hashlib.sha256((variables["cxx"] + "\0" + variables.get("ldflags", "")).encode()).hexdigest()[:16]
    cached = binding.parent / f"link-baseline-{key}.so"
    if not cached.is_file():
        tmp = cached.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")  # build threads race here
        cmd = [*shlex.split(variables["cxx"]), "-shared", str(binding), "-o", str(tmp), *shlex.split(variables.get("ldflags", ""))]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            return frozenset()
        os.replace(tmp, cached)
    return frozenset(s.raw for s in undefined_symbols(cached))


def _binding_objects(so_path: Path) -> set[Path]:
    ninja = Path(so_path).parent / "build.ninja"
    if not ninja.is_file():
        return set()
    out = set()
    for token in re.split(r"\s+", ninja.read_text(errors="replace")):
        token = token.replace("$ ", " ").replace("$:", ":")
        if token.endswith("binding.o") and Path(token).is_file():
            out.add(Path(token))
    return out


def check_object(obj_path: Path, kind: str, *, allowed_libraries: Iterable[str] = ()) -> list[Violation]:
    """The same rules over an object file's undefined symbols (``nm --undefined-only``), e.g. an nvcc ``.o``.

    Lets the CUDA rules run where objects compile but nothing links or runs (no GPU).
    """
    obj_path = Path(obj_path)
    return _judge(undefined_symbols(obj_path, dynamic=False), frozenset(), frozenset(allowed_libraries), obj_path.name)


def _judge(symbols: list[Symbol], ignore: frozenset[str], allowed: frozenset[str], where: str) -> list[Violation]:
    out: list[Violation] = []
    for sym in symbols:
        if sym.raw in ignore:
            continue
        verdict = classify_symbol(sym, allowed)
        if verdict:
            out.append(Violation(rule=verdict[0], message=verdict[1], file=where))
    return out
