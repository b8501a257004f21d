"""pybind11 module handles in C++ sources (``T1.cpp.module_handle``): the registration's module may define, nothing else.

A release-style binding registers its functions with ``void register_x(pybind11::module& m) { m.def(...); }``
(``PYBIND11_MODULE(name, m) { ... }`` in a single file). That ``m`` is a Python object: kept past registration or
taken as a parameter of a bound function, a module handle reaches Python at call time without any name the
``T1.cpp.python_api`` patterns refuse: ``t.def("allclose", ...)`` on the ``torch`` module handed in replaces a torch
function, ``m.def("forward", ...)`` inside a bound lambda swaps the extension's own function after verification,
``t.def_submodule("linalg")`` returns torch's submodule from ``sys.modules``, ``t.add_object(...)`` overwrites
attributes, ``t(...)``/``t[...]`` call into Python. So:

- a module type (``pybind11::module``, ``py::module_`` ...) may appear only as the one parameter of a registration
  function, ``void NAME(pybind11::module& p)`` (declared or defined): not as a parameter of anything else (a bound
  function, a lambda), a variable, a member, a template argument or an alias;
- inside a registration function the module ``p`` may only be used as ``p.def(...)``, ``p.doc() = ...``,
  ``p.attr("NAME") = value`` and ``other_registration(p)``, and never inside a lambda (a lambda runs at call time);
- a registration function is only named where it is declared, in ``REGISTER_BINDING(name, fn)`` and in
  ``fn(p)`` from another registration function: a registration bound with ``m.def`` could be called from Python with
  any module.

Attribute sets (``.attr("NAME") = value``) on anything but a registration's module stay ``T1.cpp.python_api``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cuda_agent.harness.integrity.violation import Violation

_MODULE = r"(?:::\s*)?(?:pybind11|py)\s*::\s*module_?\b"
#: A module type (``py::module_::import`` is the python_api rule's: a static member, not a handle).
MODULE_TYPE = re.compile(rf"(?<![\w:]){_MODULE}(?!\s*::)")
#: ``void NAME(pybind11::module& p)`` followed by its body or ``;``.
REGISTRATION = re.compile(rf"\bvoid\s+(?:\w+\s*::\s*)*(\w+)\s*\(\s*{_MODULE}\s*&\s*(\w+)\s*\)\s*(\{{|;)")
#: ``PYBIND11_MODULE(name, p) {`` (a single file's own registration).
PYBIND11_MODULE = re.compile(r"\bPYBIND11_MODULE\s*\(\s*\w+\s*,\s*(\w+)\s*\)\s*\{")
#: pybind11 helpers that make Python objects (arguments' default values): only in `.def(...)` arguments.
_VALUE_HELPERS = re.compile(r"\b(?:py|pybind11)\s*::\s*(arg_v|arg|none|kw_only|pos_only|doc|call_guard)\b")
_ATTR_SET = re.compile(r'(\.|->)\s*attr\s*\(\s*""\s*\)\s*=(?!=)')
_HINT = ("register with `void register_x(pybind11::module& m) { m.def(\"name\", &fn); }` and take tensors and "
         "numbers in the bound functions")


def registration_names(code: str) -> set[str]:
    """Names of the registration functions ``code`` declares or defines (stripped C++ text)."""
    return {m.group(1) for m in REGISTRATION.finditer(code)}


def _close(code: str, i: int) -> int:
    """Index after the brace group opening at ``code[i]`` (the end of ``code`` when unbalanced)."""
    depth = 0
    for j in range(i, len(code)):
        depth += code[j] == "{"
        depth -= code[j] == "}"
        if depth == 0:
            return j + 1
    return len(code)


def _close_paren(code: str, i: int) -> int:
    """Index after the parenthesis group opening at ``code[i]`` (the end of ``code`` when unbalanced)."""
    depth = 0
    for j in range(i, len(code)):
        depth += code[j] == "("
        depth -= code[j] == ")"
        if depth == 0:
            return j + 1
    return len(code)


def _lambdas(code: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans (capture list to closing brace) of the lambdas in ``code[start:end]``."""
    spans = []
    for m in re.finditer(r"(?:(?<=[(,={;:?])|(?<=\breturn)|^)\s*\[", code[start:end], re.MULTILINE):
        i = start + m.end() - 1
        depth, j = 0, i
        while j < end:
            depth += code[j] == "["
            depth -= code[j] == "]"
            j += 1
            if depth == 0:
                break
        rest = re.match(r"\s*(\((?:[^()]|\([^()]*\))*\))?[^;{}()]*\{", code[j:end])
        if rest:
            spans.append((i, _close(code, j + rest.end() - 1)))
    return spans


def check_module_handles(lines: list[tuple[int, str]], filename: str, suffix: str = "",
                         registrations: Iterable[str] = ()) -> list[Violation]:
    """``T1.cpp.module_handle`` (and ``T1.cpp.python_api`` for attribute sets) in one file's stripped or
    macro-expanded ``lines`` (``(line number, text)``); ``registrations`` adds registration functions declared in
    the workspace's other files."""
    code = "\n".join(text for _, text in lines)
    starts = [0]
    for _, text in lines:
        starts.append(starts[-1] + len(text) + 1)

    def line_of(offset: int) -> int:
        lo, hi = 0, len(lines) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if starts[mid] <= offset else (lo, mid - 1)
        return lines[lo][0] if lines else 1

    found: list[Violation] = []

    def flag(offset: int, why: str, rule: str = "T1.cpp.module_handle") -> None:
        line_start = code.rfind("\n", 0, offset) + 1
        line_end = code.find("\n", offset)
        what = code[line_start:line_end if line_end >= 0 else len(code)].strip()
        found.append(Violation(rule=rule, file=filename, line=line_of(offset),
                               message=f"`{what[:70]}`: {why}; {_HINT}{suffix}"))

    regs = list(REGISTRATION.finditer(code))
    names = {m.group(1) for m in regs} | set(registrations)
    param_types = [(m.start(), m.end()) for m in regs]
    for m in MODULE_TYPE.finditer(code):
        if not any(s <= m.start() < e for s, e in param_types):
            flag(m.start(), "a pybind11 module handle outside the one parameter of a registration function reaches Python "
                 "objects at call time (a bound function or lambda taking a module, a copy, a member, an alias)")
    bodies = [(m.group(2), m.end() - 1, _close(code, m.end() - 1)) for m in regs if m.group(3) == "{"]
    bodies += [(m.group(1), m.end() - 1, _close(code, m.end() - 1)) for m in PYBIND11_MODULE.finditer(code)]
    attr_sets_ok: set[int] = set()  # offsets of the `.` of the registration module's attribute sets
    for param, start, end in bodies:
        lambdas = _lambdas(code, start, end)
        for m in re.finditer(rf"(?<![\w.:>]){re.escape(param)}\b", code[start:end]):
            at = start + m.start()
            rest = code[at + len(param):end]
            caller = re.search(r"(\w+)\s*\(\s*$", code[start:at])
            attr = re.match(r'\s*(\.|->)\s*attr\s*\(\s*""\s*\)\s*=(?!=)', rest)
            if any(s <= at < e for s, e in lambdas):
                flag(at, "the registration's module used inside a lambda runs at "
                     "call time, after registration (it could redefine functions or reach Python)")
            elif re.match(r"\s*\.\s*def\s*\(", rest) or re.match(r"\s*\.\s*doc\s*\(\s*\)\s*=(?!=)", rest):
                continue
            elif attr:
                attr_sets_ok.add(at + len(param) + attr.start(1))
            elif caller and caller.group(1) in names and re.match(r"\s*\)", rest):
                continue  # register_other(m): that function's own body is judged the same way
            else:
                flag(at, "the registration's module may only be used as `m.def(...)`,"
                     " `m.doc() = ...`, `m.attr(\"NAME\") = value` or `register_other(m)`; anything else (import, "
                     "def_submodule, add_object, a call, an index, a copy, its address) reaches Python objects")
    for m in _ATTR_SET.finditer(code):
        if m.start() not in attr_sets_ok:
            flag(m.start(), "`.attr(...) = ...` sets attributes of the registration's own module only", "T1.cpp.python_api")
    # The registration's `m.def(...)` may only be followed by `;` or a chained `.def(...)`: its result is the module.
    for m in re.finditer(r"(?<![\w.:>])(\w+)\s*\.\s*def\s*\(", code):
        if not any(m.group(1) == param and s <= m.start() < e for param, s, e in bodies):
            continue
        j = _close_paren(code, m.end() - 1)
        while True:
            chained = re.match(r"\s*\.\s*def\s*\(", code[j:])
            if not chained:
                break
            j = _close_paren(code, j + chained.end() - 1)
        if not re.match(r"\s*;", code[j:]):
            flag(j, "the result of `m.def(...)` is the module: only `;` or another `.def(...)` may follow")
    # Python values made from C++ ones (py::arg_v's value, py::none()) are objects with Python operators and calls:
    # the registration helpers belong in the arguments of `.def(...)`, outside its lambdas' bodies.
    defs = [(m.end() - 1, _close_paren(code, m.end() - 1)) for m in re.finditer(r"(\.|->)\s*def\s*\(", code)]
    all_lambdas = _lambdas(code, 0, len(code))
    for m in _VALUE_HELPERS.finditer(code):
        inside_def = any(s < m.start() < e for s, e in defs)
        in_lambda = any(s <= m.start() < e for s, e in all_lambdas)
        if not inside_def or in_lambda:
            flag(m.start(), f"`{m.group(0).strip()}` makes a Python object; pybind11's registration helpers "
                 "(py::arg, py::arg_v, py::none(), py::kw_only ...) belong in the arguments of m.def(...), outside "
                 "lambda bodies", "T1.cpp.python_api")
    for name in names:
        for m in re.finditer(rf"(?<![\w.>]){re.escape(name)}\b", code):  # `ns::name` is checked too
            at = m.start()
            if any(r.start() <= at < r.end() for r in regs if r.group(1) == name):
                continue
            # REGISTER_BINDING(name, fn), REGISTER_BINDING(name, &fn), REGISTER_BINDING_DOC(name, fn, "doc") (session 41)
            if re.search(r"\bREGISTER_BINDING(_DOC)?\s*\(\s*\w+\s*,\s*&?\s*(?:(?:::\s*)?\w+\s*::\s*)*$",
                         code[max(0, at - 120):at]) and re.match(r'\s*(,\s*""\s*)?\)', code[m.end():]):
                continue
            if re.match(r"\s*\(\s*\w+\s*\)", code[m.end():]) and any(s <= at < e for _, s, e in bodies):
                continue  # other_registration(m): its use of m was judged above
            flag(at, f"the registration function `{name}` is used as a value (bound "
                 "with m.def or stored, it could be called from Python with any module)")
    return found
