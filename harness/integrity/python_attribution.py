"""Who calls into Python in an object file: pybind11's and torch's machinery, or the candidate's own code.

A release-style binding (``torch/extension.h`` + ``void register_x(pybind11::module& m)``) compiles
pybind11's and torch's Python-facing templates into the candidate's object: argument casters, the
dispatcher ``cpp_function`` builds around each ``m.def``, error translation. Depending on the compiler
and the signatures, those import ``PyObject_Call*``/``PyObject_Vectorcall`` and friends, exactly the
symbols a candidate would import to call ``torch.matmul`` through Python. The symbol alone cannot tell
them apart; the code that references it can.

Every relocation of the object is attributed to the function (or data object) whose bytes hold it
(``readelf -r`` offsets inside ``readelf -s`` ranges; COMDAT sections hold one inline or template
function each). A function is **library-owned** when every name in its demangled signature is
rooted in a library namespace (``pybind11``, ``torch``, ``c10``, ``at``, ``std`` ...) or is a builtin
type: ``pybind11::cpp_function::initialize<at::Tensor (*&)(at::Tensor), ...>::{lambda(...)#3}::_FUN``
is machinery, while ``register_x(pybind11::module_&)::{lambda(at::Tensor)#1}::operator()``, or a
pybind11 template instantiated with that lambda (the compiler may inline the lambda there), is the
candidate's. The candidate's own functions may not reference a Python call/import/eval symbol, nor a
pybind11 entry point that imports, evaluates, or calls a Python object (``module_::import``,
``eval``, ``exec``, ``globals``, ``object_api<...>::operator()``, ``.attr``): :func:`python_call_sites`.
What only library-owned code references is :func:`machinery_python_symbols`, which the binary rules
subtract. The source rules (``T1.cpp.python_api``) keep candidate code out of library namespaces and
away from pybind11's Python-level API, so machinery stays what the headers make it.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

#: Namespaces (first component of a qualified name) whose code is library machinery.
LIBRARY_ROOTS: frozenset[str] = frozenset(
    "pybind11 torch c10 at caffe2 std __gnu_cxx __cxxabiv1 __cxx11".split()
)
#: Words of demangled names that are not names of entities (types, keywords, demangler prose).
_BUILTIN_WORDS: frozenset[str] = frozenset(
    """void bool char wchar_t char8_t char16_t char32_t short int long signed unsigned float double __int128
    __float128 _Float16 __bf16 const volatile restrict __restrict auto decltype nullptr_t operator lambda new
    delete sizeof alignof noexcept true false typeinfo name for vtable VTT guard variable construction in
    non virtual thunk to covariant return transaction clone unnamed _object _typeobject _frame _ts _is
    _longobject _Py_Identifier PyObject PyTypeObject PyModuleDef PyMethodDef PyGetSetDef Py_buffer
    PyThreadState PyInterpreterState _PyArg_Parser PyCodeObject PyFrameObject __va_list_tag""".split()
)
#: Python C-API symbols that import, run, evaluate, call or reach attributes of Python code (``T1.binary.python_api``).
PYTHON_API_PATTERN = (
    r"^(PyImport_\w+|PyRun_\w+|Py_CompileString\w*|PyEval_EvalCode\w*|PyEval_EvalFrame\w*|PyEval_Call\w*|"
    r"PyEval_Get\w+|_?PyObject_Call\w*|_?PyObject_Vectorcall\w*|_?PyObject_FastCall\w*|PyVectorcall_\w+|"
    r"PyCFunction_Call\w*|PyObject_GetAttr\w*|PyObject_SetAttr\w*|PySys_\w+|PyFrame_\w+|PyMarshal_\w+|PyCode_\w+|"
    r"PyFunction_\w+|PyMethod_New|PyModule_GetDict|Py_Initialize\w*|PyGC_\w+|THPVariable_\w+Class|THPModule_\w+)$"
)
PYTHON_API_SYMBOL = re.compile(PYTHON_API_PATTERN)
#: pybind11 entry points (demangled) that import, evaluate or call Python objects.
PYBIND_CALL_ENTRY = re.compile(
    r"pybind11::(module_?|detail::\w+)::import\(|pybind11::eval\w*|pybind11::exec\b|pybind11::globals\(|"
    r"pybind11::print\b|pybind11::module_?::reload|pybind11::detail::(simple|unpacking)_collector|"
    r"pybind11::detail::collect_arguments|object_api<[^()]*>::operator\(\)|object_api<[^()]*>::(attr|call)\b|"
    r"pybind11::detail::accessor<[^()]*>::operator\(\)|pybind11::handle::call\b|pybind11::function::"
)
_ROOT_NAME = re.compile(r"(?<![\w:$.~])([A-Za-z_]\w*)")


def library_owned(demangled: str) -> bool:
    """True when every name in ``demangled`` is rooted in a library namespace or is a builtin word."""
    text = re.sub(r"\[clone [^\]]*\]|\babi:\w+", "", demangled)
    for m in _ROOT_NAME.finditer(text):
        word = m.group(1)
        if word in LIBRARY_ROOTS or word in _BUILTIN_WORDS:
            continue
        return False
    return True


@dataclass(frozen=True)
class CallSite:
    """One reference from code to a Python symbol or pybind11 entry: which function holds it, what it names."""

    owner: str  # demangled name of the function/object holding the reference ('' = unknown)
    target: str  # demangled referenced name
    raw_target: str  # the symbol as written in the object
    candidate_owned: bool


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}")
    return proc.stdout


_SECTION_RE = re.compile(r"^\s*\[\s*(\d+)\]\s+(\S+)")
_SYMBOL_RE = re.compile(r"^\s*\d+:\s+([0-9a-fA-F]+)\s+(\d+|0x[0-9a-fA-F]+)\s+(\w+)\s+\w+\s+\w+\s+(\w+)\s+(\S+)")
_RELSEC_RE = re.compile(r"^Relocation section '([^']+)'")
_RELOC_RE = re.compile(r"^\s*([0-9a-fA-F]+)\s+[0-9a-fA-F]+\s+\S+\s+[0-9a-fA-F]+\s+(\S+)")


def _references(obj: Path) -> list[tuple[str, str]]:
    """(owner raw symbol or section name, referenced raw symbol) for every relocation outside debug/unwind data."""
    sections = {int(m.group(1)): m.group(2) for line in _run(["readelf", "-W", "-S", str(obj)]).splitlines()
                if (m := _SECTION_RE.match(line))}
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for line in _run(["readelf", "-W", "-s", str(obj)]).splitlines():
        m = _SYMBOL_RE.match(line)
        if not m or m.group(3) not in ("FUNC", "OBJECT") or not m.group(4).isdigit():
            continue
        section = sections.get(int(m.group(4)))
        if section is None:
            continue
        size = int(m.group(2), 0) if m.group(2).startswith("0x") else int(m.group(2))
        spans.setdefault(section, []).append((int(m.group(1), 16), max(size, 1), m.group(5).split("@")[0]))
    for rows in spans.values():
        rows.sort()
    out: list[tuple[str, str]] = []
    target_section = ""
    for line in _run(["readelf", "-W", "-r", str(obj)]).splitlines():
        m = _RELSEC_RE.match(line)
        if m:
            name = m.group(1)
            target_section = re.sub(r"^\.rela?", "", name)
            continue
        m = _RELOC_RE.match(line)
        if not m or not target_section or target_section.startswith((".debug", ".eh_frame", ".note", ".gcc_except")):
            continue
        offset, symbol = int(m.group(1), 16), m.group(2).split("@")[0]
        rows = spans.get(target_section, [])
        i = bisect.bisect_right(rows, (offset, float("inf"), "")) - 1
        owner = rows[i][2] if i >= 0 and rows[i][0] <= offset < rows[i][0] + rows[i][1] else target_section
        out.append((owner, symbol))
    return out


def _demangle(names: list[str]) -> list[str]:
    from cuda_agent.harness.integrity.binary import demangle

    return demangle(names)


def _owner_name(raw_owner: str, demangled: str) -> str:
    """Owner for an unresolved section: '.text._ZN...' names its COMDAT function."""
    if raw_owner.startswith(".text.") and raw_owner[6:].startswith("_Z"):
        return _demangle([raw_owner[6:]])[0]
    return demangled


_CACHE: dict[str, tuple[CallSite, ...]] = {}
_CACHE_LOCK = threading.Lock()


def python_references(obj: Path) -> list[CallSite]:
    """Every reference of ``obj`` to a Python API symbol or a pybind11 call entry, with its owner.

    Memoised by the file's content hash.
    """
    if shutil.which("readelf") is None:
        raise RuntimeError("`readelf` (binutils) is not on PATH; the binary integrity check needs it")
    key = hashlib.sha256(Path(obj).read_bytes()).hexdigest()
    with _CACHE_LOCK:
        if key in _CACHE:
            return list(_CACHE[key])
    refs = _references(Path(obj))
    owners = sorted({o for o, _ in refs})
    targets = sorted({t for _, t in refs})
    dem_owner = dict(zip(owners, _demangle(owners), strict=True))
    dem_target = dict(zip(targets, _demangle(targets), strict=True))
    sites: list[CallSite] = []
    seen: set[tuple[str, str]] = set()
    for raw_owner, raw_target in refs:
        target = dem_target[raw_target]
        if not (PYTHON_API_SYMBOL.match(raw_target) or PYBIND_CALL_ENTRY.search(target)):
            continue
        owner = _owner_name(raw_owner, dem_owner[raw_owner])
        if (owner, raw_target) in seen:
            continue
        seen.add((owner, raw_target))
        # A reference from an unnamed section ('.text', '.data') is charged to the candidate.
        owned = owner.startswith(".") or not library_owned(owner)
        sites.append(CallSite(owner=owner, target=target, raw_target=raw_target, candidate_owned=owned))
    with _CACHE_LOCK:
        _CACHE[key] = tuple(sites)
    return sites


def python_call_sites(obj: Path, runtime_symbols: frozenset[str] = frozenset()) -> list[CallSite]:
    """References from the candidate's own code to Python API symbols (but ``runtime_symbols``, which module
    registration itself needs) or to pybind11 call entries."""
    return [s for s in python_references(obj) if s.candidate_owned and s.raw_target not in runtime_symbols]


def machinery_python_symbols(obj: Path) -> frozenset[str]:
    """Raw Python API symbols that only library-owned code of ``obj`` references (pybind11/torch machinery)."""
    sites = python_references(obj)
    charged = {s.raw_target for s in sites if s.candidate_owned}
    return frozenset(s.raw_target for s in sites if not s.candidate_owned and s.raw_target not in charged)
