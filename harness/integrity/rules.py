"""The integrity rule table: every rule id the integrity layer can report.

A rule id reads ``T<n>.<layer>.<what>``: ``T<n>`` is the threat class number
of ``THREATS.md`` (the cheat it stops), ``<layer>`` the check that found it
(``python`` = AST of ``model_new.py``, ``cpp`` = C++/CUDA sources,
``binary`` = undefined symbols of the built module, ``runtime`` = checks
inside the candidate process). Every rejection names its rule id, and
``docs/integrity.md`` explains each one with its known limits.
"""

from __future__ import annotations

import re

#: rule id -> one-line description (what the candidate did that is refused).
RULES: dict[str, str] = {
    # --- T1: PyTorch / library fallback -----------------------------------
    "T1.python.torch_call": "forward uses a torch function outside the allocation/metadata allowlist "
    "(torch.matmul, torch.einsum, torch.linalg.*, F.*, torch.nn.functional.* ...)",
    "T1.python.private_torch": "code reaches torch internals (torch.ops.aten, torch._C, _VF, torch._refs, any torch._*)",
    "T1.python.tensor_method": "forward calls a tensor method outside the metadata/view allowlist (.sum(), .relu(), .mm() ...)",
    "T1.python.operator": "forward applies an arithmetic/comparison operator to a tensor (@, +, *, >, ...)",
    "T1.python.submodule_call": "forward calls a torch.nn submodule or a callable other than the extension and its own helpers",
    "T1.python.builtin_call": "forward calls a builtin outside the allowlist (len, int, range, isinstance, min/max on ints ...)",
    "T1.python.dynamic_code": "code builds or runs code dynamically (eval, exec, compile, __import__, importlib, load_inline)",
    "T1.python.reflection": "code uses reflection to reach hidden names (getattr with a computed name, globals(), vars(), "
    "sys.modules, dunder attributes)",
    "T1.python.import_not_allowed": "model_new.py imports a module outside the allowlist (torch, torch.nn, cuda_extension, math, typing)",
    "T1.python.native_access": "code loads native code directly (ctypes, cffi, torch.ops.load_library)",
    "T1.python.decorator": "a decorator outside the allowlist (torch.compile, torch.jit.script, functools caches ...)",
    "T1.python.class_base": "a class derives from something other than torch.nn.Module / torch.autograd.Function",
    "T1.python.module_statement": "a module-level statement other than imports, definitions and constant assignments",
    "T1.python.no_model_new": "model_new.py does not define class ModelNew, or cannot be parsed",
    "T1.python.extension_unused": "ModelNew.forward never calls the compiled extension",
    "T1.cpp.aten_call": "C++/CUDA source calls an ATen/torch compute function (at::matmul, torch::relu, at::native::*, ...)",
    "T1.cpp.aten_method": "C++/CUDA source calls a tensor compute method (x.matmul(y), x.sum(), x.relu_() ...)",
    "T1.cpp.namespace_import": "C++ imports, aliases or opens the at/torch/pybind11/std namespaces or specialises their "
    "templates (using namespace at; namespace T = torch; namespace pybind11 {...}), which hides calls from the checkers",
    "T1.cpp.vendor_library": "C++/CUDA source uses a vendor math library the skill does not allow (cuBLAS, cuDNN, CUTLASS, ...)",
    "T1.cpp.dynamic_loading": "C++ loads code at run time (dlopen, dlsym, <dlfcn.h>)",
    "T1.cpp.dispatcher": "C++ looks up operators through the dispatcher (c10::Dispatcher, findSchema, callBoxed, OperatorHandle)",
    "T1.cpp.dispatch_guard": "C++ manipulates dispatch keys or modes (ExcludeDispatchKeyGuard, tls_set_dispatch_key_*), "
    "which would hide ops from the runtime audit",
    "T1.cpp.python_api": "C++ calls into Python (Python.h, PyImport_*, PyObject_Call*, PyRun_*, py::module_::import, "
    "py::eval, .ptr() and PyObject/type fields, py::arg_v/py::none() values outside m.def(...) arguments)",
    "T1.cpp.module_handle": "C++ uses a pybind11 module handle beyond registration: a module parameter of a bound "
    "function or lambda, the registration's module kept, copied or used other than m.def/m.doc()/m.attr(NAME) = v, "
    "a registration function bound as a value (each reaches Python at call time)",
    "T1.cpp.unparseable_macros": "the preprocessor could not expand the file's macros, so the macro-expanded check cannot run",
    "T1.binary.aten_op": "the built module calls an ATen compute operator (undefined symbol at::_ops::<op>::call)",
    "T1.binary.aten_kernel": "the built module calls ATen kernels directly (at::native::*, at::cpu::*, at::cuda::*, at::meta::*)",
    "T1.binary.vendor_library": "the built module calls a vendor math library the skill does not allow (cublas*, cudnn*)",
    "T1.binary.dynamic_loading": "the built module imports dlopen/dlsym",
    "T1.binary.dispatcher": "the built module calls the operator dispatcher (c10::Dispatcher, findSchemaOrThrow, callBoxed)",
    "T1.binary.python_api": "the built module calls Python import/eval/attribute APIs beyond what the shared binding needs",
    "T1.binary.jit": "the built module calls TorchScript/JIT or autograd-engine entry points (torch::jit::*)",
    "T1.runtime.aten_compute": "an ATen compute op ran during forward (op audit); only the extension may compute",
    "T1.runtime.foreign_kernel": "a GPU kernel that ran during forward is not defined in the candidate's own binary",
    # --- T2: try/except fallback ------------------------------------------
    "T2.python.try_fallback": "a try/except (or try/finally) that can fall back to other code; only handlers that re-raise are allowed",
    "T2.python.suppress_fallback": "contextlib.suppress or another context manager that can swallow an extension failure",
    "T2.python.guarded_fallback": "an if/else whose one branch calls the extension and the other runs torch code",
    # --- T3: inheriting or aliasing the reference -------------------------
    "T3.python.inherit_reference": "ModelNew derives from the reference Model (or anything but torch.nn.Module)",
    "T3.python.alias_reference": "ModelNew is bound to something other than its own class definition (ModelNew = Model)",
    "T3.python.import_task": "model_new.py imports the task module (model) or reads model.py",
    # --- T5: mutating inputs ----------------------------------------------
    "T5.python.input_mutation": "forward mutates an input in place (x.zero_(), x[...] = v, x += y)",
    # --- T6: stealing the expected output ---------------------------------
    "T6.cpp.introspection": "C++ walks the call stack (backtrace, __builtin_return_address/frame_address, _Unwind_Backtrace, libunwind, <execinfo.h>)",
    "T6.binary.introspection": "the built module imports stack-walking functions (backtrace, _Unwind_Backtrace, unw_*)",
    "T6.python.introspection": "code inspects the interpreter (gc, inspect, sys._getframe, frame/traceback attributes)",
    # --- T7: patching the checker -----------------------------------------
    "T7.python.module_override": "ModelNew overrides nn.Module machinery (__call__, __getattr__, state_dict, to, ...)",
    "T7.python.monkeypatch": "code assigns to an attribute of an imported module (torch.allclose = ..., time.perf_counter = ...)",
    "T7.runtime.checker_patched": "a checking function (torch.allclose, assert_close, equal, ...) was replaced in the candidate process",
    "T7.runtime.mode_installed": "a torch function/dispatch mode or a trace/profile hook was left installed",
    # --- T8: patching the timer -------------------------------------------
    "T8.python.timer_access": "model_new.py imports or touches timing modules (time, timeit, statistics)",
    "T8.cpp.clock": "C++ reads a clock (rdtsc, std::chrono, clock_gettime, std::clock, std::time, getrusage, times, c10::getTime, omp_get_wtime): a kernel that reads the time can tell calls apart",
    "T8.binary.clock": "the built module imports clocks (clock, clock_gettime, gettimeofday, time, getrusage, times, std::chrono::*::now, omp_get_wtime)",
    "T8.runtime.timer_patched": "a timing function (perf_counter, Event.elapsed_time, synchronize, ...) was replaced, in Python or in its native code",
    # --- T9: side streams -------------------------------------------------
    "T9.python.stream": "Python code creates or switches CUDA streams or events (torch.cuda.Stream, torch.cuda.stream, Event)",
    "T9.cpp.stream": "C++/CUDA source creates a stream or launches on a non-default stream it made (cudaStreamCreate*, "
    "getStreamFromPool, cudaStreamPerThread, graphs)",
    "T9.binary.stream": "the built module imports stream-creation symbols (cudaStreamCreate*, getStreamFromPool)",
    # --- T10: background threads ------------------------------------------
    "T10.python.thread": "Python code uses threads or processes (threading, multiprocessing, concurrent, asyncio)",
    "T10.cpp.thread": "C++ starts threads or async work (std::thread, std::async, pthread_create, fork)",
    "T10.binary.thread": "the built module imports thread/process creation (pthread_create, fork, clone)",
    "T10.runtime.thread_started": "threads were started in the candidate process (Python or native) and are still alive",
    "T10.cpp.signal": "C++ installs signal handlers or arms timers (signal, sigaction, setitimer, alarm, timer_create): "
                      "host work run outside the timed call",
    "T10.binary.signal": "the built module imports signal or timer functions (signal, sigaction, setitimer, timer_create)",
    "T10.runtime.signal_state": "signal handlers, the harness's blocked signals or interval timers changed in the "
                                "candidate process",
    # --- T11: fake or lazy outputs ----------------------------------------
    "T11.python.tensor_subclass": "code defines a Tensor subclass or __torch_function__/__torch_dispatch__ hooks",
    "T11.python.lazy_output": "forward is a generator/coroutine (yield, await) instead of returning tensors",
    "T11.cpp.tensor_construction": "C++ builds tensors or storages by hand (DataPtr, Storage, TensorImpl, "
                                   "make_tensor, from_blob): memory the harness does not own, freed by the candidate's "
                                   "own code",
    "T11.binary.tensor_construction": "the built module imports hand-made tensor/storage constructors (TensorImpl, "
                                      "StorageImpl, TensorMaker, from_blob)",
    # --- T12: caching / memoization ---------------------------------------
    "T12.python.state_in_forward": "forward stores state on self or in globals (caching results across calls)",
    "T12.python.cache_key": "code keys something by data_ptr()/id()/hash() of a tensor",
    "T12.python.file_io": "code touches files or serialisation (open, pickle, pathlib, torch.save/load, np.save)",
    "T12.cpp.static_cache": "C++ keeps results across calls (static/global containers or tensors, data_ptr-keyed maps)",
    "T12.cpp.file_io": "C++ reads or writes files (fopen, fstream, open, mmap)",
    # --- T15: silent precision drop ---------------------------------------
    "T15.python.dtype_cast": "forward casts tensors to another dtype (.half(), .to(torch.float16), .bfloat16())",
    "T15.runtime.dtype_cast": "a copy during forward cast a tensor below the inputs' precision (op audit: _to_copy, "
                              "copy_ from float32 to float16/bfloat16, float64 to float32)",
    # --- T16: global flags ------------------------------------------------
    "T16.python.global_flag": "code changes global torch/CUDA/env settings (torch.backends.*, set_float32_matmul_precision, "
    "os.environ, set_num_threads, manual_seed)",
    "T16.runtime.flag_changed": "a torch global flag differs after the candidate ran (allow_tf32, cudnn.benchmark, precision ...)",
    "T16.runtime.env_changed": "environment variables differ after the candidate ran",
    "T16.cpp.thread_count": "C++ sets OpenMP/ATen thread counts (num_threads, omp_set_num_threads): more threads than "
                            "the sandbox's budget the baselines run with",
    # --- T20: L2 persistence ----------------------------------------------
    "T20.cpp.l2_persistence": "C++/CUDA source sets persisting-L2 policies (accessPolicyWindow, cudaLimitPersistingL2CacheSize, "
    "cudaCtxResetPersistingL2Cache, cudaStreamSetAttribute)",
    "T20.binary.l2_persistence": "the built module imports L2-persistence controls (cudaCtxResetPersistingL2Cache, "
    "cudaStreamSetAttribute, cudaDeviceSetLimit)",
    # --- T23: process-level attacks ---------------------------------------
    "T23.python.process_access": "code imports process/OS/network modules (os, sys, subprocess, socket, signal, shutil)",
    "T23.cpp.system_call": "C++ calls system/process/network functions (system, popen, exec*, socket, ptrace, /proc)",
    "T23.binary.system_call": "the built module imports system/process/network functions (system, popen, execve, socket, ptrace)",
}

_THREAT_RE = re.compile(r"^T(\d+)\.")


def threat_class(rule_id: str) -> int:
    """THREATS.md class number of ``rule_id`` (``"T12.cpp.static_cache"`` -> 12)."""
    match = _THREAT_RE.match(rule_id)
    if match is None:
        raise ValueError(f"rule id {rule_id!r} does not start with 'T<n>.'; valid ids: see cuda_agent.harness.integrity.RULES")
    return int(match.group(1))


def describe(rule_id: str) -> str:
    """One-line description of ``rule_id``; an error lists the valid ids when it is unknown."""
    try:
        return RULES[rule_id]
    except KeyError:
        raise KeyError(f"unknown integrity rule {rule_id!r}; valid rules: {', '.join(sorted(RULES))}") from None
