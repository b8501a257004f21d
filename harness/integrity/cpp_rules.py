"""Source rules for the candidate's C++/CUDA files (``kernels/*``): THREATS.md classes 1, 9, 10, 12, 20, 23.

Each file is checked twice: as written (comments and string literals
blanked, so every ``#if`` branch is seen) and after its own macros are
expanded by the real preprocessor (so ``#define MM at::matmul`` or
``a##b`` token pasting cannot hide a call). What the rules cannot see
(unqualified calls found by argument-dependent lookup, tensor operators such
as ``a * b`` in C++) is caught by the undefined symbols of the built binary
(``binary.py``); see docs/integrity.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from cuda_agent.harness.integrity.cpp_patterns import CODE_PATTERNS, INCLUDE_PATTERNS, STRING_PATTERNS
from cuda_agent.harness.integrity.cpp_pybind import check_module_handles, registration_names
from cuda_agent.harness.integrity.cpp_source import StrippedSource, expand_macros, macro_definitions, strip_code
from cuda_agent.harness.integrity.cpp_user_types import UserTypeScope
from cuda_agent.harness.integrity.cpp_vectorized import VecScope
from cuda_agent.harness.integrity.violation import Violation, dedupe

#: File suffixes treated as C/C++/CUDA source.
SOURCE_SUFFIXES: frozenset[str] = frozenset({".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl", ".inc"})

#: Protected files written by the harness; never checked (their hashes are verified instead).
PROTECTED_SOURCES: frozenset[str] = frozenset({"binding.cpp", "binding_registry.h"})

#: Vendor libraries a skill may allow (``allowed_libraries``); everything listed here is refused by default.
VENDOR_LIBRARIES: dict[str, tuple[str, ...]] = {
    "cublas": (r"\bcublas\w*", r"getCurrentCUDABlasHandle", r"getCurrentCUDABlasLtHandle"),
    "cudnn": (r"\bcudnn\w*", r"getCudnnHandle"),
    "cutlass": (r"\bcutlass\s*::", r"\bcute\s*::"),
    "cusparse": (r"\bcusparse\w*", r"getCurrentCUDASparseHandle"),
    "cusolver": (r"\bcusolver\w*", r"getCurrentCUDASolverDnHandle"),
    "cufft": (r"\bcufft\w*",),
    "cblas": (r"\bcblas_\w+", r"\bmkl_\w+", r"\bdnnl\w*", r"\bmkldnn\w*", r"\bEigen\s*::"),
}

#: ``at::``/``torch::``/``c10::`` names an honest binding may use: allocation, metadata, guards, streams it is given.
ALLOWED_QUALIFIED: frozenset[str] = frozenset(
    {
        # allocation
        "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
        # types and metadata helpers
        "Tensor", "TensorBase", "TensorOptions", "Scalar", "ScalarType", "IntArrayRef", "Device", "DeviceType",
        "DeviceGuard", "OptionalDeviceGuard", "Half", "BFloat16", "MemoryFormat", "Layout", "TensorArg", "Float8_e4m3fn",
        "Float8_e5m2", "complex", "ceil_div", "elementSize", "toString", "isFloatingType", "isIntegralType",
        "isComplexType", "isReducedFloatingType", "device", "dtype", "layout", "requires_grad", "typeMetaToScalarType",
        "checkDim", "checkSameGPU", "checkAllSameGPU", "checkContiguous", "checkScalarType", "checkAllSameType",
        "acc_type", "opmath_type", "irange", "TensorAccessor", "PackedTensorAccessor32", "PackedTensorAccessor64",
        "GenericPackedTensorAccessor", "RestrictPtrTraits", "DefaultPtrTraits", "ArrayRef", "optional", "nullopt",
        "SmallVector", "string_view", "ScalarTypeToCPPType", "CppTypeToScalarType", "kCUDA", "kCPU", "NoGradGuard",
        "InferenceMode", "AutoGradMode", "get_num_threads", "parallel_for", "in_parallel_region", "Error",
        # ATen/Parallel.h's threading helpers and ATen/cuda/NumericLimits.cuh's limits: header-only, no operator behind them
        "parallel_reduce", "get_thread_num", "numeric_limits",
        # session 42: the guard's device (ATen/DeviceGuard.h), dim wrapping (ATen/WrapDimUtils.h) and the argument
        # checks of ATen/TensorUtils.h: inline or plain functions over metadata, no operator behind them
        "device_of", "maybe_wrap_dim", "checkSize", "checkAllContiguous", "checkSameSize", "checkAllSameSize",
        "checkDeviceType", "checkSameType", "checkDimRange", "checkNumel", "checkSameNumel", "checkAllSameNumel",
        "checkScalarTypes", "checkDefined", "checkAllDefined", "checkLayout", "checkSameDim", "check_dim_size",
        "ValueError", "IndexError", "TypeError", "str", "detail", "cuda", "util", "convert", "from_blob",
        # CUDA context (the current stream is honest; making or switching streams is not)
        "CUDAGuard", "OptionalCUDAGuard", "getCurrentCUDAStream", "getDefaultCUDAStream",
        "getCurrentDeviceProperties", "getDeviceProperties", "current_device", "device_count", "CUDAStream",
        "getNumGPUs", "CUDACachingAllocator", "warp_size",
    }
)

_QUALIFIED_RE = re.compile(r"\b(at|torch|c10|aten)((?:\s*::\s*\w+)+)\s*(<[^;(){}]*>)?\s*(\()?")

#: Tensor methods that compute (C++ ``x.matmul(y)``); std-container names (min/max of numeric_limits...) excluded.
ATEN_COMPUTE_METHODS: frozenset[str] = frozenset(
    """matmul mm bmm addmm addmv addbmm baddbmm mv dot vdot outer ger einsum linear conv1d conv2d conv3d
    conv_transpose1d conv_transpose2d conv_transpose3d convolution sum mean prod cumsum cumprod norm std var softmax
    log_softmax logsumexp relu relu_ gelu gelu_ silu silu_ sigmoid sigmoid_ tanh tanh_ exp exp_ log log_ log1p expm1
    sqrt sqrt_ rsqrt rsqrt_ pow pow_ add add_ sub sub_ mul mul_ div div_ addcmul addcdiv neg neg_ reciprocal clamp
    clamp_ clamp_min clamp_max hardtanh leaky_relu elu selu softplus mish hardswish hardsigmoid threshold where
    masked_fill masked_fill_ masked_scatter index_select gather scatter scatter_ scatter_add index_add index_add_
    index_put index_put_ index_copy argmax argmin amax amin topk sort argsort cummax cummin max min abs abs_ square
    triu tril diag diagonal flip roll repeat repeat_interleave tile bitwise_and logical_and logical_or logical_not eq ne
    lt le gt ge isnan isinf nan_to_num cross kron tensordot allclose equal inverse det svd qr cholesky lerp maximum
    minimum fmod remainder floor ceil trunc sign erf erfc sin cos tan histc bincount nonzero count_nonzero median
    quantile nanmean nansum var_mean std_mean layer_norm group_norm batch_norm instance_norm rms_norm dropout
    max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool2d adaptive_max_pool2d
    embedding pixel_shuffle upsample_nearest2d upsample_bilinear2d grid_sampler pad constant_pad_nd
    matrix_power addr logit hypot atan2 frac sinh cosh asin acos atan""".split()
)
_METHOD_RE = re.compile(r"(?:\.|->)\s*(\w+)\s*(?:<[^;(){}]*>)?\s*\(")


#: A CPU BLAS/LAPACK routine's name, any case, with the suffixes vendors export (``sgemm``, ``SGEMM``, ``sgemm_64``,
#: ``dgemm_``, ``sgemm_batch_strided``, ``isamax``): the source form of the binary rule's "cblas" family.
BLAS_ROUTINE = re.compile(
    r"(?i)\b(i?[sdcz]{1,2}(gemm\w*|gemv|symm|hemm|syrk|herk|syr2k|her2k|trmm|trsm|trmv|trsv|ger[uc]?|axpby|axpy|"
    r"dot[uc]?|scal|nrm2|asum|amax|amin|copy|swap|rotg?|rotmg?|symv|hemv|sbmv|spmv|gbmv|tbmv|tpmv|getr[fsi]|"
    r"potr[fsi]|gesv|gesvd|gesdd|geqrf|syevd?|heevd?|gels)(_batch\w*|_64|_)*)\b")


#: What precedes a literal that only names something (session 42: `m.def("sgemm", &own_fn)` and
#: `AT_DISPATCH_FLOATING_TYPES(t, "sgemm", ...)` were vendor BLAS uses): a Python name, a dispatch message.
_NAME_ONLY_CONTEXT = re.compile(r'(?:(?:\.|->)\s*def\s*\(|\bAT_DISPATCH_\w+\s*\([^;{}"]*,)\s*$')


def _symbol_literals(stripped: StrippedSource) -> list[str]:
    """The string literals of ``stripped`` that could name a symbol (an asm label, a weakref's target ...): all but the
    names given to ``.def(...)`` and to ``AT_DISPATCH_*(...)``, unless the text defines a macro of those names."""
    marks = list(re.finditer(r'""', stripped.code))  # strip_code leaves one `""` per string literal, in order
    redefined = re.search(r"^\s*#\s*define\s+(def|AT_DISPATCH_\w*)\b", stripped.code, re.MULTILINE)
    if len(marks) != len(stripped.strings) or redefined:
        return [lit for _, lit in stripped.strings]
    return [lit for (_, lit), m in zip(stripped.strings, marks, strict=True)
            if not _NAME_ONLY_CONTEXT.search(stripped.code[max(0, m.start() - 200):m.start()])]


def external_blas(text: str, label: str, allowed_libraries: Iterable[str] = ()) -> list[Violation]:
    """Uses of BLAS routine names that ``text`` calls, declares or names in an asm label without defining them: a
    vendor BLAS reached by a hand-written declaration (libtorch exports MKL's ``sgemm``). For sources complete in
    one text (a single file's ``load_inline``); a workspace's imports are judged by the binary rules."""
    if "cblas" in set(allowed_libraries):
        return []
    stripped = strip_code(text)
    code = stripped.code
    found: list[Violation] = []
    literals = {lit.strip() for lit in _symbol_literals(stripped)}
    names = {m.group(1) for m in BLAS_ROUTINE.finditer(code)}
    names |= {lit for lit in literals if BLAS_ROUTINE.fullmatch(lit)}
    for name in sorted(names):
        defined = re.search(rf"\b{re.escape(name)}\s*\([^;{{}}]*\)\s*(const\s*)?(noexcept\s*)?\{{", code)
        used = re.search(rf"\b{re.escape(name)}\s*\(", code) or name in literals
        if used and not defined:
            found.append(Violation(rule="T1.cpp.vendor_library", file=label,
                                   message=f"`{name}` is called or declared but not defined here: a vendor BLAS "
                                           "routine (cblas) the skill does not allow"))
    return found


def head_is_vec(parts: list[str]) -> bool:
    """``at::vec::<name>`` (one name; ``Vectorized<float>::loadu`` is matched up to the template)."""
    return parts[0] == "vec" and len(parts) <= 2 and all(p not in {"_ops", "native", "detail"} for p in parts)


#: The vendor library each ``at::cuda::getCurrentCUDA*Handle`` hands out (allowed where the skill allows it).
_HANDLE_LIBRARIES = {"getCurrentCUDABlasHandle": "cublas", "getCurrentCUDABlasLtHandle": "cublas",
                     "getCurrentCUDASparseHandle": "cusparse", "getCurrentCUDASolverDnHandle": "cusolver"}


def _qualified_violation(prefix: str, chain: str, called: bool,
                         allowed_libraries: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """Rule and message for a qualified name like ``at::native::add`` (None = allowed)."""
    parts = [p.strip() for p in chain.split("::") if p.strip()]
    name = ".".join(parts)
    full = prefix + "::" + "::".join(parts)
    if not parts:
        return None
    if prefix == "aten" or parts[0] in {"_ops", "native", "cpu", "meta", "compositeexplicitautograd",
                                         "compositeimplicitautograd", "compositeexplicitautogradnonfunctional",
                                         "redispatch", "linalg", "fft", "special", "nn", "jit", "autograd", "_C"}:
        if parts[0] == "nn" and len(parts) > 1 and parts[1] in {"Module"}:
            return None
        return "T1.cpp.aten_call", f"`{full}` reaches ATen/torch compute; write the kernel"
    if parts[0] == "cuda" and len(parts) > 1 and parts[1] in {"getStreamFromPool", "getStreamFromExternal",
                                                               "setCurrentCUDAStream"}:
        return "T9.cpp.stream", f"`{full}` makes or switches streams"
    if parts[0] == "cuda" and len(parts) > 1 and parts[1] not in ALLOWED_QUALIFIED:
        if parts[1].startswith("getCurrentCUDA") and parts[1].endswith("Handle"):
            if _HANDLE_LIBRARIES.get(parts[1]) in allowed_libraries:
                return None  # the skill allows that library (session 41: cuBLAS was refused even when allowed)
            return "T1.cpp.vendor_library", f"`{full}` hands out a vendor library handle"
        return ("T1.cpp.aten_call", f"`{full}` is not on the allowlist of at::cuda helpers") if called else None
    if prefix == "c10":
        if parts[0] == "impl" and len(parts) > 1 and parts[1].startswith("tls"):
            return "T1.cpp.dispatch_guard", f"`{full}` changes dispatch state"
        return None  # c10 is types and utilities; dispatcher/stream names are caught by token patterns
    if prefix == "at" and head_is_vec(parts):
        # at::vec::Vectorized<float>, at::vec::maximum, at::vec::map: the header-only SIMD wrappers of
        # ATen/cpu/vec (intrinsics and Sleef, no operator behind them; none of its headers includes an op)
        return None
    if parts == ["internal", "GRAIN_SIZE"] and not called:
        return None  # at::parallel_for's default grain, a constant (ATen/Parallel.h)
    if "globalContext" in parts:
        return "T1.cpp.aten_call", f"`{full}` reaches global ATen state (flags, BLAS handles)"
    head = parts[0]
    compute = [p for p in parts[1:] if p in ATEN_COMPUTE_METHODS]
    if compute:
        return "T1.cpp.aten_call", f"`{full}` names the tensor compute method `{compute[0]}`"
    if head in ALLOWED_QUALIFIED:
        return None
    if head[:1] == "k" and head[1:2].isupper():
        return None  # at::kFloat, torch::kCUDA ... constants
    if not called and head[:1].isupper():
        return None  # types used in declarations
    return "T1.cpp.aten_call", (f"`{full}` is not on the allowlist (allocation with at::empty*/zeros*, "
                                "metadata, guards, the current stream); do the compute in your kernel")


_GLOBAL_DECL_RE = re.compile(
    r"^\s*(?:static\s+|inline\s+|volatile\s+)*(?!(?:const|constexpr|constinit|using|typedef|template|return|"
    r"extern|namespace|struct|class|enum|union|friend|__global__|__device__|__constant__|__shared__|__host__|"
    r"__managed__|static_assert|public|private|protected)\b)"
    r"[A-Za-z_][\w:]*(?:\s*<[^;(){}]*>)?(?:\s*(?:\*|&|const\b))*\s+\**\s*[A-Za-z_]\w*\s*(?:\[[^\]]*\]\s*)*(?:=[^;(]*|\{[^;(]*\})?;"
)


_CONST_POINTER_RE = re.compile(r"^\s*(?:static\s+)?const\s+(?!char\b|wchar_t\b)[\w:<>]+\s*\*+\s*[A-Za-z_]\w*\s*(=[^;(]*)?;")
_CONST_VARIABLE_RE = re.compile(r"\bconst\s+[A-Za-z_]\w*\s*(\[[^\]]*\]\s*)*(=|;|\{)")


def _statement_pieces(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """``(line number, text)`` per line, with a line that opens a namespace and declares on it (``namespace {
    float buf[64]; }``) or holds several statements cut after the namespace's brace and after each ``;``: each
    declaration is then judged on its own (session 36's red team hid a cache in a one-line anonymous namespace).
    Preprocessor directives and their continuation lines are no statements: a macro's body is judged where it is
    expanded (session 41: `#define PROLOGUE \\ int idx = ...;` was a "global" on its continuation line)."""
    out = []
    directive = False
    for lineno, ln in lines:
        starts = ln.lstrip().startswith("#")
        if directive or starts:
            directive = ln.rstrip().endswith("\\")
            continue
        m = re.match(r"^(.*?\bnamespace\b[^;{]*\{)(.+)$", ln)
        head, rest = (m.group(1), m.group(2)) if m else ("", ln)
        if head:
            out.append((lineno, head))
        out += [(lineno, piece) for piece in re.findall(r"[^;]*;|[^;]+$", rest) if piece.strip()]
    return out


def _closes_earlier_paren(text: str) -> bool:
    """``text`` closes a parenthesis opened on an earlier line: it ends a parameter list, where `T name = v` is a
    default argument (`int64_t stride = 1, int64_t padding = 0);` of a prototype over several lines, session 42),
    not a variable; a namespace-scope declaration ending at this `;` has no parenthesis left open before it."""
    depth = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return True
    return False


def _namespace_scope_state(lines: list[tuple[int, str]], filename: str, suffix: str = "") -> list[Violation]:
    """Mutable variables at namespace scope (caches, call counters): they outlive a call (T12/T13). ``lines`` are
    ``(line number, text)``, as written or macro-expanded (``#define GLOBAL float cache[N];`` then ``GLOBAL``)."""
    out: list[Violation] = []
    stack: list[bool] = []  # True = brace opened by a namespace
    pending_namespace = False
    for lineno, ln in _statement_pieces(lines):
        at_namespace_scope = all(stack)
        text = ln.strip()
        if at_namespace_scope and text and not _closes_earlier_paren(text) and (
                (_GLOBAL_DECL_RE.match(ln) and not _CONST_VARIABLE_RE.search(ln)) or _CONST_POINTER_RE.match(ln)):
            out.append(Violation(rule="T12.cpp.static_cache", file=filename, line=lineno,
                                 message=f"`{text[:70]}`: mutable global state outlives a call (caches, call counters); "
                                         f"use locals, constexpr constants or __constant__/__device__ memory{suffix}"))
        for m in re.finditer(r"\bnamespace\b[^;{]*(?=\{)|[{}]", ln):
            tok = m.group(0)
            if tok.startswith("namespace"):
                pending_namespace = True
            elif tok == "{":
                stack.append(pending_namespace or bool(re.search(r'extern\s*""\s*$', ln[: m.start()])))
                pending_namespace = False
            elif stack:
                stack.pop()
    return out


def check_cpp_text(text: str, filename: str, *, allowed_libraries: Iterable[str] = (),
                   extra_defines: str = "", registrations: Iterable[str] = (),
                   headers: str | None = None) -> list[Violation]:
    """Violations of the C++/CUDA source rules in one file's ``text``.

    :param text: file contents.
    :param filename: workspace-relative name used in violations.
    :param allowed_libraries: vendor libraries the skill allows (keys of ``VENDOR_LIBRARIES``).
    :param extra_defines: ``#define`` lines from the workspace's other files (so their macros expand here too).
    :param registrations: pybind11 registration functions declared in the workspace's other files.
    :param headers: the stripped text of the workspace's headers (their declarations count when proving a receiver is
        an at::vec::Vectorized); None when unknown, and then arithmetic on Vectorized values in a file that includes a
        local header is not proven Vectorized.
    """
    stripped = strip_code(text)
    found: list[Violation] = []
    raw_lines = stripped.code.split("\n")
    allowed = frozenset(allowed_libraries)
    vendor = [(lib, re.compile(p)) for lib, pats in VENDOR_LIBRARIES.items() if lib not in allowed for p in pats]

    text_lines = text.split("\n")
    local_headers = headers is None and any(re.match(r'\s*#\s*include\s*"', text_lines[n - 1])
                                            and not inc.endswith("binding_registry.h")
                                            for n, inc in stripped.includes if n <= len(text_lines))

    def scan(lines: list[tuple[int, str]], suffix: str) -> None:
        vec = VecScope("\n".join(ln for _, ln in lines) + "\n" + (headers or ""), local_headers=local_headers)
        own = UserTypeScope("\n".join(ln for _, ln in lines))
        for lineno, ln in lines:
            for pat in CODE_PATTERNS:
                m = pat.search(ln)
                if m:
                    found.append(Violation(rule=pat.rule, message=f"`{m.group(0).strip()[:60]}`: {pat.message}{suffix}",
                                           file=filename, line=lineno))
            for lib, rx in vendor:
                m = rx.search(ln)
                if m:
                    found.append(Violation(rule="T1.cpp.vendor_library",
                                           message=f"`{m.group(0).strip()}`: {lib} is not allowed by the skill "
                                                   f"(allowed: {', '.join(sorted(allowed)) or 'none'}){suffix}",
                                           file=filename, line=lineno))
            for m in _QUALIFIED_RE.finditer(ln):
                verdict = _qualified_violation(m.group(1), m.group(2), m.group(4) is not None, allowed)
                if verdict:
                    found.append(Violation(rule=verdict[0], message=verdict[1] + suffix, file=filename, line=lineno))
            for m in _METHOD_RE.finditer(ln):
                if m.group(1) in ATEN_COMPUTE_METHODS and not (ln[m.start()] == "." and (
                        vec.is_vec_receiver(ln, m.start()) or own.allows(ln, m.start(), m.group(1)))):
                    found.append(Violation(rule="T1.cpp.aten_method",
                                           message=f"`.{m.group(1)}(...)` is a tensor compute method; write the kernel "
                                                   "(on an at::vec::Vectorized value it is allowed when the receiver "
                                                   "is declared with that type, an alias of it, or `auto` from "
                                                   "Vectorized<...>::loadu(...) and the like)" + suffix,
                                           file=filename, line=lineno))

    scan(list(enumerate(raw_lines, start=1)), "")
    found.extend(check_module_handles(list(enumerate(raw_lines, start=1)), filename, "", registrations))
    found.extend(_namespace_scope_state(list(enumerate(raw_lines, start=1)), filename))
    for lineno, inc in stripped.includes:
        if not re.match(r"\s*#\s*include", raw_lines[lineno - 1] if lineno - 1 < len(raw_lines) else ""):
            continue  # inside a comment
        for pat in INCLUDE_PATTERNS:
            if pat.regex.search(inc):
                found.append(Violation(rule=pat.rule, message=f"#include <{inc}>: {pat.message}", file=filename,
                                       line=lineno))
        for lib, rx in vendor:
            if rx.search(inc.replace("/", "::").replace(".h", "")) or inc.lower().startswith(lib):
                found.append(Violation(rule="T1.cpp.vendor_library",
                                       message=f"#include <{inc}>: {lib} is not allowed by the skill", file=filename,
                                       line=lineno))
    for lineno, lit in stripped.strings:
        for pat in STRING_PATTERNS:
            if pat.regex.search(lit):
                found.append(Violation(rule=pat.rule, message=f'"{lit[:60]}": {pat.message}', file=filename,
                                       line=lineno))
    # Second pass through the preprocessor: macros that build or alias names.
    has_macros = "#" in stripped.code and re.search(r"^\s*#\s*define\b", stripped.code, re.MULTILINE)
    if has_macros or extra_defines.strip():
        expanded = expand_macros(stripped.code, filename, extra_defines)
        if expanded.ok:
            scan(expanded.lines, " (after macro expansion)")
            found.extend(check_module_handles(expanded.lines, filename, " (after macro expansion)", registrations))
            found.extend(_namespace_scope_state(expanded.lines, filename, " (after macro expansion)"))
        else:
            found.append(Violation(rule="T1.cpp.unparseable_macros",
                                   message=f"the preprocessor failed on this file's macros: {expanded.error}",
                                   file=filename, line=None))
    # The same finding with and without the expansion note: keep the first.
    return dedupe(found)


def source_files(workspace_root: Path) -> list[Path]:
    """Candidate C/C++/CUDA files in a workspace (everything but the protected binding files)."""
    out = []
    for path in sorted(workspace_root.rglob("*")):
        rel = path.relative_to(workspace_root)
        if any(part.startswith(".") for part in rel.parts) or rel.parts[0] in {"build", "__pycache__"}:
            continue
        if path.is_file() and path.suffix in SOURCE_SUFFIXES and str(rel) not in PROTECTED_SOURCES:
            out.append(path)
    return out


def check_cpp_sources(workspace_root: Path, *, allowed_libraries: Iterable[str] = ()) -> list[Violation]:
    """Violations of the source rules in every candidate C/C++/CUDA file of ``workspace_root``."""
    files = source_files(workspace_root)
    texts = {p: p.read_text(errors="replace") for p in files}
    headers = [p for p in files if p.suffix in {".h", ".hpp", ".cuh", ".hh", ".inl", ".inc"}]
    out: list[Violation] = []
    registrations = set().union(*(registration_names(strip_code(t).code) for t in texts.values()))
    for path, text in texts.items():
        extra = "\n".join(macro_definitions(strip_code(texts[h]).code) for h in headers if h != path)
        rel = str(path.relative_to(workspace_root))
        context = "\n".join(strip_code(texts[h]).code for h in headers if h != path)
        out.extend(check_cpp_text(text, rel, allowed_libraries=allowed_libraries, extra_defines=extra,
                                  registrations=registrations, headers=context))
    return out
