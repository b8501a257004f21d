"""The token patterns of the C++/CUDA source rules (:mod:`~cuda_agent.harness.integrity.cpp_rules`): over the code
(stripped, and again macro-expanded), over ``#include`` names, and over string literals. Each names its rule id
(docs/integrity.md's table) and a message saying what to write instead."""

from __future__ import annotations

import re
from dataclasses import dataclass

@dataclass(frozen=True)
class _Pattern:
    rule: str
    regex: re.Pattern[str]
    message: str
    exempt: re.Pattern[str] | None = None
    """Text blanked before ``regex`` is searched (a form of the refused token that is honest)."""

    def search(self, line: str) -> re.Match[str] | None:
        """The first refused match in ``line`` (after blanking what ``exempt`` matches)."""
        if self.exempt is not None:
            line = self.exempt.sub(lambda m: " " * len(m.group(0)), line)
        return self.regex.search(line)


def _p(rule: str, pattern: str, message: str, exempt: str | None = None) -> _Pattern:
    return _Pattern(rule, re.compile(pattern), message, re.compile(exempt) if exempt else None)


#: ``name.data_ptr()`` / ``name->data_ptr<T>()``: a tensor's address read in this call.
_DATA_PTR_CALL = r"\w+\s*(?:\.|->)\s*data_ptr\s*(?:<[^;()]*>)?\s*\(\s*\)"


#: A numeric literal (``1``, ``-2.5f``, ``1e-5``, ``0x1F``, ``3u``).
_LITERAL = r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[fFlLuU]*"

#: Token patterns over stripped (and macro-expanded) code.
CODE_PATTERNS: tuple[_Pattern, ...] = (
    _p("T1.cpp.namespace_import", r"\busing\s+namespace\s+(::\s*)?(at|torch|c10|aten|pybind11|py)\b",
       "`using namespace at/torch/c10/pybind11` hides ATen and Python calls; write qualified names (at::empty, "
       "torch::Tensor, py::arg)"),
    _p("T1.cpp.namespace_import", r"\bnamespace\s+(?!py\s*=\s*(::\s*)?pybind11\s*;)\w+\s*=\s*(::\s*)?"
       r"(at|torch|c10|aten|pybind11|py)\b",
       "aliasing the at/torch/pybind11 namespaces hides ATen and Python calls (`namespace py = pybind11;` is fine)"),
    _p("T1.cpp.namespace_import", r"\bnamespace\s+(::\s*)?(std|pybind11|py|torch|at|c10|caffe2|aten|"
       r"__gnu_cxx)\b(\s*::\s*\w+)*\s*\{",
       "code placed inside a library namespace passes for library code; put your code in your own namespace"),
    _p("T1.cpp.namespace_import", r"\b(struct|class|union)\s+(::\s*)?(std|pybind11|py|torch|at|c10|caffe2|"
       r"cuda_agent_binding)\s*::[^;()]*(\{|$)",
       "specialising a library template puts your code inside library code; write your own types"),
    _p("T1.cpp.namespace_import", r"\btemplate\s*<\s*>\s*[^;{]*?\b(std|pybind11|py|torch|at|c10|caffe2|"
       r"cuda_agent_binding)\s*::\s*(\w+\s*::\s*)*(\w+|operator\s*\S+?)\s*(<[^;{()]*>)?\s*\(",
       "specialising a library function template puts your code inside library code"),
    _p("T1.cpp.namespace_import", r"\busing\s+(::\s*)?(pybind11|py)\s*::\s*(?!arg\b|arg_v\b|module_?\b)\w+",
       "using-declarations of pybind11 names hide Python calls; only py::arg and py::module may be used"),
    _p("T1.cpp.dynamic_loading", r"\b(dlopen|dlsym|dlvsym|dlmopen|dlinfo|LoadLibrary\w*|GetProcAddress|cuModuleLoad\w*|"
       r"cuLibraryLoad\w*|cudaLibraryLoad\w*|cuGetProcAddress\w*|cudaGetDriverEntryPoint\w*|cuModuleGetFunction)\b",
       "loading code at run time is not allowed"),
    # Walking the loaded objects' symbol tables finds any function by name without importing it (session 36's red
    # team: MKL's sgemm through dl_iterate_phdr; a GOT slot of libpython's clock_gettime rewritten)
    _p("T1.cpp.dynamic_loading", r"\b(dl_iterate_phdr|dladdr1?|dl_phdr_info|getauxval|_r_debug|r_debug|link_map|"
       r"_DYNAMIC|_GLOBAL_OFFSET_TABLE_|ElfW|Elf(32|64)_\w+|DT_(GNU_HASH|HASH|SYMTAB|STRTAB|JMPREL|RELA|PLTGOT)|"
       r"PT_(DYNAMIC|LOAD)|AT_(SYSINFO_EHDR|PHDR|BASE|ENTRY)|R_X86_64_\w+)\b",
       "reading the process's loaded objects (symbol tables, GOT, auxiliary vector) is not allowed"),
    _p("T1.cpp.dispatcher", r"\b(Dispatcher|findSchema\w*|findOp|callBoxed|call_boxed|OperatorHandle|"
       r"TypedOperatorHandle|OperatorEntry|RegisterOperators|getOperation|TORCH_LIBRARY\w*|TORCH_MODULE_FRAGMENT)\b",
       "operator dispatcher lookups/registrations are not allowed; call only your own kernels"),
    # Symbolic numbers call back into their Python node (guard_int, int_ ...), and the dispatch-mode queries tell an
    # audited call from another (session 37's red team: torch compute in a SymInt node, honest C++ only when audited)
    _p("T1.cpp.python_api", r"\b(SymInt|SymFloat|SymBool|SymNode\w*|SymIntArrayRef|guard_int|guard_float|guard_bool|"
       r"expect_int|expect_size|maybe_as_int|PythonSymNodeImpl)\b",
       "symbolic numbers call back into Python; take plain int64_t/double arguments"),
    _p("T1.cpp.dispatch_guard", r"\b(dispatch_mode_enabled|torch_function_mode_enabled|tls_is_dispatch_key\w*|"
       r"get_dispatch_mode|TorchFunctionMetadata|PythonTorchFunctionTLS|is_torch_function_mode_enabled)\b",
       "reading the dispatch modes tells an audited call from another; kernels must not depend on them"),
    _p("T1.cpp.dispatch_guard", r"\b(DispatchKey\w*|ExcludeDispatchKeyGuard|IncludeDispatchKeyGuard|"
       r"tls_set_dispatch_key\w*|tls_local_dispatch_key_set|_force_tls_local_dispatch_key_set|AutoDispatchBelow\w*|"
       r"ForceDispatchKeyGuard|DisableTorchDispatch|TorchDispatchModeTLS|PythonDispatcherTLS|impl\s*::\s*tls_\w+)\b",
       "changing dispatch keys/modes would hide ops from the runtime audit"),
    _p("T1.cpp.python_api", r"\b(_?Py[A-Z]\w*|THP\w+|PyObject)\b",
       "calling into Python from C++ is not allowed"),
    _p("T1.cpp.python_api", r"\b(py|pybind11)\s*::\s*(object|function|handle|eval\w*|exec|globals|getattr|setattr|"
       r"hasattr|module_\s*::\s*import|module\s*::\s*import|reinterpret_\w+|dict|cpp_function|capsule|str|bytes|"
       r"cast|import|isinstance|type)\b",
       "pybind11 objects/imports/attribute access are not allowed; register plain C++ functions"),
    # `m.attr("NAME") = value` (a set, the name a literal) is judged by cpp_pybind: allowed on the registration's module
    _p("T1.cpp.python_api", r'(\.|->)\s*attr\s*\((?!\s*""\s*\)\s*=(?!=))',
       "pybind11 `.attr(...)` reaches Python objects; not allowed"),
    _p("T1.cpp.python_api", r"\b(py|pybind11)\s*::\s*(?!(arg|arg_v|module_?|return_value_policy|call_guard|"
       r"gil_scoped_release|overload_cast|none|kw_only|pos_only|doc|const_)\b)\w+",
       "only the registration part of pybind11 may be used (py::module, m.def, py::arg, py::arg_v, py::none, "
       "py::call_guard<py::gil_scoped_release>, py::overload_cast, py::return_value_policy); register plain C++ "
       "functions"),
    _p("T1.cpp.python_api", r"\b(py|pybind11)\s*::\s*module_?\s*::\s*(?!(def)\b)\w+",
       "pybind11 module functions other than def are not allowed"),
    _p("T1.cpp.python_api", r"(?<![\w.>:~])(getattr|hasattr|setattr|delattr|eval_file|globals|reinterpret_borrow|"
       r"reinterpret_steal|isinstance)\s*(<[^;()]*>)?\s*\(",
       "pybind11 free functions (found by argument-dependent lookup) reach Python objects; not allowed"),
    # A pybind11 object's raw PyObject* and the interpreter's type slots reach any Python attribute or call with no
    # Py* name (`o.ptr()->ob_type->tp_getattro(...)`, `->tp_call(...)`): nothing an honest binding needs
    _p("T1.cpp.python_api", r"(\.|->)\s*ptr\s*\(\s*\)|\b(ob_type|ob_refcnt|ob_base|ob_item|tp_(call|getattro|getattr|"
       r"setattro|setattr|dict|base|bases|mro|new|init|alloc|free|dealloc|repr|str|as_number|as_sequence|as_mapping|"
       r"iter|iternext|descr_get|descr_set|methods|members|getset|vectorcall\w*|richcompare|subclasses)|"
       r"mp_subscript|mp_ass_subscript|sq_item|sq_ass_item|ma_values|ma_keys)\b",
       "raw Python objects (`.ptr()`, PyObject/PyTypeObject fields such as ob_type, tp_getattro, tp_call) reach "
       "Python from C++; not allowed"),
    _p("T1.cpp.python_api", r"\bmodule_?\s*::\s*import\b|(\.|->)\s*(import|reload)\s*\(",
       "importing Python modules from C++ is not allowed"),
    _p("T9.cpp.stream", r"\b(cudaStreamCreate\w*|cuStreamCreate\w*|getStreamFromPool|getStreamFromExternal|"
       r"setCurrentCUDAStream|getNewStream|exchangeStream|getStreamFromGlobalPool|cudaStreamPerThread|cudaStreamNonBlocking|cudaStreamWaitEvent|cudaStreamBeginCapture\w*|"
       r"cudaGraph\w*|cuGraph\w*|cudaStreamEndCapture)\b",
       "creating/switching streams or graphs is not allowed; launch on at::cuda::getCurrentCUDAStream()"),
    _p("T20.cpp.l2_persistence", r"\b(accessPolicyWindow|cudaAccessPolicyWindow|cudaAccessProperty\w*|"
       r"cudaLimitPersistingL2CacheSize|cudaCtxResetPersistingL2Cache|cudaStreamSetAttribute|cudaStreamAttrValue|"
       r"cudaStreamAttributeAccessPolicyWindow|cudaLaunchAttributeAccessPolicyWindow|"
       r"cudaKernelNodeAttributeAccessPolicyWindow|cudaDeviceSetLimit|cuCtxSetLimit|cuCtxResetPersistingL2Cache)\b",
       "persisting-L2 controls are not allowed (they survive the timer's cache flush)"),
    _p("T10.cpp.thread", r"\b(std\s*::\s*(thread|jthread|async)|pthread_create|boost\s*::\s*thread|"
       r"cudaLaunchHostFunc|cudaStreamAddCallback|vfork|posix_spawn\w*)\b",
       "starting threads or deferred host work is not allowed; OpenMP parallel regions are fine"),
    _p("T10.cpp.thread", r"(?<![.\w>:])\s*\b(fork|clone)\s*\(", "creating processes/threads is not allowed"),
    # A signal handler runs the candidate's code outside the timed call: an interval timer's handler computed the
    # next output from the staged inputs while the harness flushed caches, or wrote a returned output after the
    # timer's end (session 37's red team, reward 3 on the CPU backend).
    _p("T10.cpp.signal", r"(?<![.\w])(?<!->)(?:std\s*::\s*|::\s*)?\b(signal|sigaction|__sigaction|sigset|sigvec|"
       r"bsd_signal|sysv_signal|__sysv_signal|ssignal|setitimer|getitimer|alarm|ualarm|timer_create|timer_settime|"
       r"timerfd_create|timerfd_settime|sigaltstack|sigprocmask|pthread_sigmask|raise|sigqueue|pthread_kill|tgkill|"
       r"sigsuspend|sigwait\w*|signalfd|setcontext|swapcontext|makecontext)\s*\(",
       "signal handlers and timers run host work outside the timed call; do all the work inside forward"),
    _p("T10.cpp.signal", r"\b(sigaction|itimerval|itimerspec|sigevent|sighandler_t|__sighandler_t|sigset_t|siginfo_t|"
       r"ucontext_t|SIGALRM|SIGVTALRM|SIGPROF|SIGUSR[12]|SIGIO|SIGPOLL|SIGRTMIN|SIGRTMAX|SIGEV_\w+|ITIMER_\w+|"
       r"SA_SIGINFO|SA_RESTART|SIG_IGN|SIG_DFL)\b",
       "signal handlers and timers run host work outside the timed call; do all the work inside forward"),
    # A tensor or storage made by hand lives in memory the candidate owns and is freed by the candidate's deleter:
    # dropping the previous call's outputs ran it between the next inputs' staging and the timer (session 37).
    _p("T11.cpp.tensor_construction", r"\b(DataPtr|StorageImpl|TensorImpl|make_tensor|from_blob|TensorMaker|"
       r"for_blob|unsafeGetTensorImpl|unsafeReleaseTensorImpl|unsafe_reclaim_from_nonowning|set_sizes_contiguous|"
       r"set_storage_keep_dtype|set_storage_offset|make_intrusive|intrusive_ptr|ShareExternalPointer|"
       r"InefficientStdFunctionContext|UniqueVoidPtr|DeleterFnPtr)\b|\b(c10|at|torch)\s*::\s*Storage\b",
       "tensors and storages come from at::empty*/zeros*/torch::empty*; hand-built ones own memory and deleters "
       "the harness does not control"),
    # More threads than the sandbox's budget is a speed the baselines do not get (they run with the same
    # OMP_NUM_THREADS); on the CPU backend the extra OpenMP pool threads were then refused at run time as background
    # work (session 37's red team), a confusing verdict for an honest kernel: refused here, with the reason.
    # (`dim3 num_threads(16, 16)` declares a CUDA launch's block shape, not an OpenMP clause, except on a pragma's line,
    # where `#define dim3` would make it one: session 42)
    _p("T16.cpp.thread_count", r"^\s*#\s*pragma\b.*\bnum_threads\s*\(|"
       r"(?:^|[^\w\s]|(?<!\w)(?!dim3\b)\w+)\s*\bnum_threads\s*\(|"
       r"\b(omp_set_num_threads|omp_set_dynamic|omp_set_max_active_levels|omp_set_nested|kmp_set_\w+|set_num_threads|"
       r"set_num_interop_threads)\b",
       "setting thread counts is not allowed: kernels run with the sandbox's thread budget (OMP_NUM_THREADS), as "
       "the baselines do; write `#pragma omp parallel for` without num_threads"),
    # `static const std::array<float, 3> kC = {1.f, 2.f, 3.f};` is a table of literals, not a cache (session 41)
    _p("T12.cpp.static_cache", r"\b(static|thread_local)\b(?!\s+constexpr\b)(?!\s+const\s+std\s*::\s*array\s*<[^;(){}]*>\s*"
       r"\w+\s*=?\s*\{\s*(" + _LITERAL + r")(\s*,\s*(" + _LITERAL + r"))*\s*,?\s*\}\s*;)"
       r"[^;(){}=]*\b(std\s*::\s*(unordered_map|map|vector|"
       r"unordered_set|set|deque|list|array|shared_ptr|unique_ptr|optional|pair|tuple)|at\s*::\s*Tensor|"
       r"torch\s*::\s*Tensor|Tensor)\b\s*(<[^;(){}]*>)?[\s*&]*\w+\s*(=|;|\{|\[)",
       "static/thread_local containers or tensors keep results across calls"),
    _p("T12.cpp.static_cache", r"\b(static|thread_local)\b(?!\s+(const|constexpr|__device__|__forceinline__|inline|"
       r"__host__|__global__|void|bool|int|float|double|unsigned|long|size_t|int64_t|int32_t|char|auto\s+\w+\s*\())"
       r"[^;(){}]*\*\s*\w+\s*(=|;)",
       "static pointers remember earlier calls' buffers (data_ptr caches)"),
    _p("T12.cpp.static_cache", r"\bthread_local\b", "thread_local state persists across calls"),
    # Two tensors of this call compared by address, or one against nullptr, is an aliasing or a definedness check
    # (`TORCH_CHECK(out.data_ptr() != x.data_ptr(), ...)`, session 42): a remembered address is anything else
    _p("T12.cpp.static_cache", r"data_ptr\s*(<[^;()]*>)?\s*\(\s*\)\s*(==|!=)|(==|!=)\s*\w+(\.|->)data_ptr\b",
       "comparing data pointers across calls is a cache check",
       exempt=rf"{_DATA_PTR_CALL}\s*(?:==|!=)\s*(?:{_DATA_PTR_CALL}|(?:nullptr|NULL)\b)|"
              rf"\b(?:nullptr|NULL)\s*(?:==|!=)\s*{_DATA_PTR_CALL}"),
    # A subscript keyed by an address; a lambda's init-capture of one (`[src = x.data_ptr<float>()](int64_t b, ...)`,
    # session 42) is a local copy, except in a static or thread_local declaration, which keeps the first call's
    _p("T12.cpp.static_cache", r"\.\s*(find|count|emplace|insert|try_emplace|contains)\s*\([^;]*data_ptr|"
       r"(?:(?<!\w)(?!(?:return|co_return|co_yield|throw|case|else|do)\b)\w+|[\])])\s*\[[^\]]*data_ptr[^\]]*\]|"
       r"\b(?:static|thread_local)\b[^;]*\[[^\]]*data_ptr[^\]]*\]",
       "keying a container by data_ptr is a cache"),
    _p("T12.cpp.file_io", r"\b(fopen|freopen|fdopen|fwrite|fread|fputs|fgets|ifstream|ofstream|fstream|filesystem|"
       r"mmap|munmap|creat|unlink|rename|opendir|readdir|FILE)\b",
       "file access is not allowed"),
    _p("T12.cpp.file_io", r"(?<![\w.>:])(open|openat|open64)\s*\(", "raw file descriptors are not allowed"),
    _p("T23.cpp.system_call", r"(?<![\w.>:])(system|popen|execl|execlp|execle|execv|execvp|execvpe|execve|socket|connect|bind|"
       r"listen|accept|ptrace|syscall|kill|getenv|setenv|putenv|unsetenv|secure_getenv|prctl|setuid|chroot|"
       r"process_vm_readv|process_vm_writev|mprotect|pkey_mprotect|pkey_alloc|mremap|madvise|memfd_create|"
       r"shm_open)\s*\(",
       "system, process, environment, network and memory-protection calls are not allowed"),
    # A clock of the candidate's own: the CPU's cycle counter (what a patched clock_gettime would run on)
    _p("T8.cpp.clock", r"\b(__rdtsc|__rdtscp|_rdtsc|__builtin_ia32_rdtscp?|__builtin_readcyclecounter)\b",
       "reading the CPU's cycle counter is not allowed: times come from the harness's clock"),
    # A kernel has no use for the time; reading it tells the audited call (slower) from the others (session 37's
    # red team timed a torch::empty with std::chrono to pick honest work only under the audit)
    _p("T8.cpp.clock", r"\b(chrono|steady_clock|system_clock|high_resolution_clock|clock_gettime|gettimeofday|"
       r"timespec_get|clock_t|CLOCKS_PER_SEC)\b|(?<![\w.>:])(clock|time)\s*\(\s*(NULL|nullptr|0)?\s*\)",
       "reading clocks is not allowed: kernels must not depend on time (times come from the harness)"),
    # The same clocks under other names (session 38's red team: std::clock(), std::time(nullptr), getrusage, times,
    # sysinfo, c10::getTime and omp_get_wtime all passed): each tells one call from another as well as chrono does
    _p("T8.cpp.clock", r"\b(std|c10)\s*::\s*(clock|time|timespec_get|difftime|getTime|getApproximateTime|"
       r"ApproximateClock\w*)\b|(?<![\w.>])::\s*(clock|time)\s*\(|\b(getrusage|clock_getres|clock_getcpuclockid|"
       r"pthread_getcpuclockid|omp_get_wtime|omp_get_wtick|ftime|rusage|tms)\b|\b(times|sysinfo)\s*\(\s*&",
       "reading clocks is not allowed (std::clock, std::time, getrusage, times, sysinfo, c10::getTime, "
       "omp_get_wtime ...): kernels must not depend on time (times come from the harness)"),
    # The native side of sys._getframe (session 38's red team: all passed): walking the caller's frames tells the
    # audited or verifying call from a timed one by who called it, and reaches the interpreter's frames' memory
    _p("T6.cpp.introspection", r"\b(backtrace|backtrace_symbols\w*|__builtin_return_address|__builtin_frame_address|"
       r"__builtin_extract_return_addr|_Unwind_Backtrace|_Unwind_GetIP\w*|_Unwind_GetCFA|unw_\w+|boost\s*::\s*"
       r"stacktrace|std\s*::\s*stacktrace\w*)\b",
       "walking the call stack is not allowed: a kernel must not depend on who calls it"),
)


#: ``#include`` targets refused, by rule.
INCLUDE_PATTERNS: tuple[_Pattern, ...] = (
    _p("T6.cpp.introspection", r"^(execinfo\.h|unwind\.h|libunwind\.h|stacktrace|boost/stacktrace.*)$",
       "stack-walking headers (<execinfo.h>, <unwind.h>, <stacktrace>) are not allowed"),
    _p("T1.cpp.dynamic_loading", r"^(dlfcn\.h|link\.h|elf\.h|sys/auxv\.h|gnu/lib-names\.h)$",
       "<dlfcn.h>, <link.h>, <elf.h>, <sys/auxv.h> (finding code at run time) are not allowed"),
    _p("T1.cpp.python_api", r"^(Python\.h|pybind11/(eval|embed|numpy|functional|iostream)\.h|torch/csrc/autograd/python_\w+\.h|"
       r"torch/csrc/jit/.*)$", "Python/TorchScript headers are not allowed in kernels"),
    _p("T1.cpp.dispatcher", r"^(ATen/core/dispatch/.*|ATen/core/op_registration/.*|torch/library\.h|"
       r"ATen/core/boxing/.*)$", "dispatcher headers are not allowed"),
    _p("T1.cpp.aten_call", r"^(ATen/native/.*|ATen/ops/(?!empty|zeros|ones|full).*|torch/csrc/api/include/torch/"
       r"(nn|linalg|fft|special).*|ATen/Functions\.h|ATen/NativeFunctions\.h|"
       r"ATen/CPUFunctions\.h|ATen/CUDAFunctions\.h)$", "ATen compute headers are not allowed"),
    _p("T10.cpp.thread", r"^(thread|future|pthread\.h|spawn\.h)$", "threading headers are not allowed"),
    _p("T12.cpp.file_io", r"^(fstream|filesystem|sys/mman\.h|fcntl\.h|dirent\.h)$", "file I/O headers are not allowed"),
    _p("T23.cpp.system_call", r"^(sys/socket\.h|netinet/.*|arpa/.*|netdb\.h|sys/ptrace\.h|sys/prctl\.h|"
       r"sys/syscall\.h|unistd\.h|sys/wait\.h|signal\.h|csignal)$", "system/network headers are not allowed"),
)

#: String-literal contents refused, by rule.
STRING_PATTERNS: tuple[_Pattern, ...] = (
    _p("T1.cpp.dynamic_loading", r"\blib\w*\.so\b|\.dylib\b|\.dll\b", "naming shared libraries is not allowed"),
    _p("T1.cpp.dispatcher", r"^\s*(aten|prim|torch)::\w+", "operator schema names are not allowed"),
    _p("T23.cpp.system_call", r"/proc/|/dev/(mem|shm|tcp)|/sys/", "reading /proc, /sys or /dev is not allowed"),
    _p("T23.cpp.system_call", r"\b(syscall|sysenter|int\s+\$0x80)\b", "system calls from inline assembly are not allowed"),
    # raw machine code in an asm string (a system call or a code patch spelled as bytes); PTX has none of these
    _p("T23.cpp.system_call", r"(^|[;\n\t ]|\\[nt])\.(byte|2byte|4byte|8byte|hword|short|word|long|quad|octa|inst|value)\b",
       "raw machine code in inline assembly is not allowed"),
    _p("T8.cpp.clock", r"\b(rdtscp?|rdpmc)\b", "reading the CPU's cycle counter is not allowed: times come from the "
       "harness's clock"),
    # `_Pragma("omp parallel for num_threads(8)")`: the clause the code pattern refuses on a #pragma line (session 42)
    _p("T16.cpp.thread_count", r"^\s*omp\b.*\bnum_threads\s*\(", "setting thread counts is not allowed: kernels run "
       "with the sandbox's thread budget (OMP_NUM_THREADS), as the baselines do"),
)
