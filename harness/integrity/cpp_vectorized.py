"""Receivers the C++ source rules can prove to be ``at::vec::Vectorized`` values, so ``v.exp()`` on one is SIMD.

``T1.cpp.aten_method`` refuses tensor compute methods by name (``x.exp()``, ``x.log()``): the rule sees text, not
types. ``at::vec::Vectorized<float>`` has methods of the same names (``exp``, ``log``, ``sqrt``, ``neg`` ...),
header-only SIMD with no ATen operator behind them, so honest CPU kernels were refused (NOTES.md, "False
rejections"). :class:`VecScope` allows such a call only when the receiver is *provably* a Vectorized value:

- a name every declaration of which in the text has a Vectorized type: ``at::vec::Vectorized<...>``, an alias of it
  declared once (``using Vec = at::vec::Vectorized<float>;``, ``typedef``, a template alias), or unqualified
  ``Vectorized<...>`` after ``using at::vec::Vectorized;``; or ``auto`` initialised from a Vectorized expression;
- a Vectorized expression: ``Vec(...)``, ``Vec::loadu(...)`` (and the other factories), ``at::vec::maximum(...)``
  (and the other free functions returning Vectorized), a chain of Vectorized methods on one of those, and, where the
  text overloads no operator, arithmetic of Vectorized operands and numeric literals.

Anything else (a tensor named ``vec``, ``using Vec = at::Tensor;``, ``auto t = x.contiguous(); t.exp()``, a name
declared once as Vectorized and elsewhere as something else, a receiver across lines) stays refused. The proof is
textual and per file (or per macro-expanded text); what it cannot see, the binary layer still does
(``at::_ops::exp::call`` in a workspace's module) and the runtime op audit (single files).
"""

from __future__ import annotations

import re
from functools import cached_property

#: Methods of ``at::vec::Vectorized<T>`` that return a Vectorized (ATen/cpu/vec/vec_base.h).
VEC_METHODS: frozenset[str] = frozenset(
    """abs angle real imag conj acos acosh asin asinh atan atanh atan2 copysign erf erfc erfinv exp exp2 expm1 exp_u20
    fexp_u20 fmod log log10 log1p log2 frac sin sinh cos cosh ceil floor hypot i0 i0e digamma igamma igammac
    nextafter neg round tan tanh trunc lgamma sqrt reciprocal rsqrt pow eq ne gt ge lt le isnan sgn map""".split())
#: Static members of Vectorized that make one.
VEC_FACTORIES: frozenset[str] = frozenset({"loadu", "loadu_one_fourth", "blend", "blendv", "arange", "set"})
#: ``at::vec::`` free functions that return a Vectorized.
VEC_FUNCTIONS: frozenset[str] = frozenset({"maximum", "minimum", "clamp", "clamp_max", "clamp_min", "fmadd", "fmsub",
                                           "convert", "cast", "flip"})
#: Words before a name that make it an expression, not a declaration (``return v.exp()``).
_EXPRESSION_WORDS = frozenset("""return else case throw co_return co_yield co_await do new delete sizeof alignof
    typeid not and or xor bitand bitor compl not_eq and_eq or_eq xor_eq goto""".split())
_ARITHMETIC = (r"(?:float|double|int|long|short|unsigned|signed|char|bool|size_t|int64_t|int32_t|int16_t|int8_t|"
               r"uint64_t|uint32_t|uint16_t|uint8_t|scalar_t|opmath_t|acc_t)")
_TOKEN_RE = re.compile(r"\s*(::|->|&&|\.\.\.|[A-Za-z_]\w*|\d[\w.]*(?:[eE][+-]?\d+)?[fFlLuU]*|\.\d[\w]*|\S)")
_BINARY_OPS = frozenset({"+", "-", "*", "/", "&", "|", "^"})


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m or not m.group(1):
            break
        out.append(m.group(1))
        pos = m.end()
    return out


def _skip_balanced(toks: list[str], i: int) -> int:
    """Index after the bracket group opening at ``toks[i]`` (``(``, ``{``, ``[`` or ``<``); -1 if unbalanced."""
    pairs = {"(": ")", "{": "}", "[": "]", "<": ">"}
    opener, closer, depth = toks[i], pairs[toks[i]], 0
    for j in range(i, len(toks)):
        if toks[j] == opener:
            depth += 1
        elif toks[j] == closer:
            depth -= 1
            if depth == 0:
                return j + 1
        elif opener == "<" and toks[j] in {";", "{", "}"}:
            return -1
    return -1


def _opener(toks: list[str], close: int) -> int:
    """Index of the ``(`` that the ``)`` at ``toks[close]`` closes (0 when unbalanced)."""
    depth = 0
    for k in range(close, -1, -1):
        depth += toks[k] == ")"
        depth -= toks[k] == "("
        if depth == 0:
            return k
    return 0


def _is_number(tok: str) -> bool:
    return bool(re.fullmatch(r"\d[\w.]*(?:[eE][+-]?\d+)?[fFlLuU]*|\.\d\w*", tok))


class VecScope:
    """What one C++ text declares as Vectorized; :meth:`is_vec_receiver` judges one method call's receiver."""

    def __init__(self, code: str, *, local_headers: bool = False) -> None:
        """:param code: stripped (or macro-expanded) C++ text.
        :param local_headers: the file includes workspace headers, whose operator overloads this text cannot see."""
        self.code = code
        overloaded = bool(re.search(r"\boperator\s*[-+*/&|^~!<>=\[(]", code))
        #: Arithmetic on a Vectorized is Vectorized (or does not compile) only where no user operator is in reach.
        self.arithmetic_ok = not overloaded and not local_headers

    @cached_property
    def _declared_types(self) -> dict[str, int]:
        """How often each name is introduced as a type or macro (aliases must be introduced exactly once)."""
        counts: dict[str, int] = {}
        for m in re.finditer(r"\b(?:typename|class|struct|union|enum|using)\s+(\w+)|\btypedef\b[^;]*?\b(\w+)\s*;|"
                             r"^\s*#\s*define\s+(\w+)", self.code, re.MULTILINE):
            name = m.group(1) or m.group(2) or m.group(3)
            counts[name] = counts.get(name, 0) + 1
        return counts

    @cached_property
    def aliases(self) -> frozenset[str]:
        """Names declared once, as an alias of ``at::vec::Vectorized<...>``."""
        found = set()
        vt = r"(?:::\s*)?at\s*::\s*vec\s*::\s*(?:CPU_CAPABILITY\s*::\s*)?Vectorized\s*<[^;{}()]*>"
        for m in re.finditer(rf"\busing\s+(\w+)\s*=\s*(?:typename\s+)?{vt}\s*;|\btypedef\s+{vt}\s*(\w+)\s*;", self.code):
            found.add(m.group(1) or m.group(2))
        return frozenset(n for n in found if self._declared_types.get(n) == 1 and n != "Vectorized")

    @cached_property
    def _scalars(self) -> frozenset[str]:
        """Names declared somewhere with an arithmetic type (``float s``): ``s * v`` beside them is an expression."""
        return frozenset(re.findall(rf"\b{_ARITHMETIC}\s+(?:const\s+)?(\w+)\s*[=;,)]", self.code))

    @cached_property
    def unqualified_ok(self) -> bool:
        """``Vectorized<...>`` unqualified names ATen's: ``using at::vec::Vectorized;`` and no other Vectorized."""
        imported = re.search(r"\busing\s+(::\s*)?at\s*::\s*vec\s*::\s*Vectorized\s*;", self.code)
        return bool(imported) and self._declared_types.get("Vectorized", 0) == 0

    def _vec_type_end(self, toks: list[str], i: int) -> int:
        """Index after a Vectorized type starting at ``toks[i]`` (without ``::factory``), or -1."""
        j = i + 1 if i < len(toks) and toks[i] == "::" else i
        if toks[j:j + 4] == ["at", "::", "vec", "::"]:
            j += 4
            if toks[j:j + 2] == ["CPU_CAPABILITY", "::"]:
                j += 2
            if j < len(toks) and toks[j] == "Vectorized" and j + 1 < len(toks) and toks[j + 1] == "<":
                return _skip_balanced(toks, j + 1)
            return -1
        if j < len(toks) and j == i and (toks[j] in self.aliases or (toks[j] == "Vectorized" and self.unqualified_ok)):
            if j + 1 < len(toks) and toks[j + 1] == "<":
                return _skip_balanced(toks, j + 1)
            return j + 1 if toks[j] != "Vectorized" else -1
        return -1

    def _primary(self, toks: list[str], i: int, names: frozenset[str]) -> int:
        """Index after a Vectorized primary expression at ``toks[i]``, or -1."""
        if i >= len(toks):
            return -1
        end = self._vec_type_end(toks, i)
        if end > 0 and end < len(toks):
            if toks[end] in {"(", "{"}:
                return _skip_balanced(toks, end)
            if toks[end] == "::" and end + 2 < len(toks) and toks[end + 1] in VEC_FACTORIES and toks[end + 2] == "(":
                return _skip_balanced(toks, end + 2)
            return -1
        j = i + 1 if toks[i] == "::" else i
        if toks[j:j + 4] == ["at", "::", "vec", "::"] and j + 5 < len(toks) and toks[j + 4] in VEC_FUNCTIONS:
            k = j + 5
            if toks[k] == "<":
                k = _skip_balanced(toks, k)
            return _skip_balanced(toks, k) if k > 0 and k < len(toks) and toks[k] == "(" else -1
        if toks[i] == "(":
            close = _skip_balanced(toks, i)
            return close if close > 0 and self._expression(toks[i + 1:close - 1], names) else -1
        return i + 1 if toks[i] in names else -1

    def _postfix(self, toks: list[str], i: int, names: frozenset[str]) -> int:
        j = self._primary(toks, i, names)
        while 0 < j < len(toks) - 2 and toks[j] == "." and toks[j + 1] in VEC_METHODS and toks[j + 2] == "(":
            j = _skip_balanced(toks, j + 2)
        return j

    def _expression(self, toks: list[str], names: frozenset[str]) -> bool:
        """``toks`` is one Vectorized expression (operands joined by arithmetic only where no operator is overloaded)."""
        i, vec_operands, operands = 0, 0, 0
        while True:
            if i < len(toks) and toks[i] == "-":
                i += 1
            if i < len(toks) and (_is_number(toks[i]) or (
                    self.arithmetic_ok and re.fullmatch(r"[A-Za-z_]\w*", toks[i]) and toks[i] not in names
                    and (i + 1 == len(toks) or toks[i + 1] in _BINARY_OPS))):
                i += 1  # a number, or a plain name beside a Vectorized operand (Vec * float is a Vectorized)
            else:
                end = self._postfix(toks, i, names)
                if end < 0:
                    return False
                i, vec_operands = end, vec_operands + 1
            operands += 1
            if i == len(toks):
                return vec_operands > 0 and (operands == 1 or self.arithmetic_ok)
            if toks[i] not in _BINARY_OPS:
                return False
            i += 1

    @cached_property
    def names(self) -> frozenset[str]:
        """Names every declaration of which is a Vectorized one (greatest fixpoint over ``auto`` initialisers)."""
        toks = _tokens(self.code)
        decls: dict[str, list[tuple[int, bool | list[str]]]] = {}  # name -> (token index, True | auto initialiser)
        i = 0
        while i < len(toks):
            end = self._vec_type_end(toks, i)
            start = i
            if end < 0 and toks[i] == "auto":
                end = i + 1
            if end < 0 or (start > 0 and toks[start - 1] in {".", "->", "::"}):
                i += 1
                continue
            j = end
            while j < len(toks) and toks[j] in {"const", "&", "&&"}:
                j += 1
            if j + 1 < len(toks) and re.fullmatch(r"[A-Za-z_]\w*", toks[j]) and toks[j + 1] in {"=", ";", ",", ")",
                                                                                              "(", "{"}:
                if toks[i] != "auto":
                    decls.setdefault(toks[j], []).append((j, True))
                elif toks[j + 1] == "=":
                    k = j + 2
                    depth = 0
                    while k < len(toks) and not (depth == 0 and toks[k] in {";", ","}):
                        depth += toks[k] in {"(", "{", "["}
                        depth -= toks[k] in {")", "}", "]"}
                        k += 1
                    decls.setdefault(toks[j], []).append((j, toks[j + 2:k]))
            i += 1
        names = frozenset(decls)
        while True:
            kept = frozenset(n for n in names if self._all_declarations_vec(toks, n, decls[n], names))
            if kept == names:
                return names
            names = kept

    def _all_declarations_vec(self, toks: list[str], name: str, decls: list, names: frozenset[str]) -> bool:
        vec_at = {j for j, init in decls if init is True or self._expression(init, names)}
        if len(vec_at) < len(decls) or self._declared_types.get(name):
            return False
        scalars = self._scalars
        for j, tok in enumerate(toks):
            if tok != name or j in vec_at or j == 0:
                continue
            prev = toks[j - 1]
            if prev in {".", "->", "::"}:
                continue  # a member or a qualified name of something else
            if re.fullmatch(r"[A-Za-z_]\w*", prev) and prev not in _EXPRESSION_WORDS:
                return False  # `at::Tensor v`, `auto v`, `T v`: declared otherwise
            if prev in {"*", "&", "&&", ">"}:
                before = toks[j - 2] if j >= 2 else ""
                if not (_is_number(before) or before in {")", "]"} or before in names or before in scalars):
                    return False  # `Foo* v`, `Foo& v`, `Foo<X> v`
            if prev == ")" and toks[_opener(toks, j - 1) - 1:_opener(toks, j - 1)] in (["decltype"], ["typeof"],
                                                                                       ["__typeof__"]):
                return False  # `decltype(x) v`
            if prev in {"[", ","} and j + 1 < len(toks) and toks[j + 1] == "=":
                return False  # a lambda's init-capture `[v = x]` declares another v
            if prev in {"[", ","} and re.search(r"\bauto\s*(&|&&)?\s*\[[^\]]*$", " ".join(toks[max(0, j - 16):j])):
                return False  # a structured binding
        return True

    def is_vec_receiver(self, line: str, dot: int) -> bool:
        """Whether the receiver ending just before ``line[dot]`` (a ``.`` before the method name) is Vectorized."""
        toks = _tokens(line[:dot])
        start = len(toks)
        while start > 0:
            tok = toks[start - 1]
            if tok in {")", "]", ">"}:  # a call's arguments, a subscript, template arguments: to the opener
                opener, depth, k = {")": "(", "]": "[", ">": "<"}[tok], 0, start - 1
                while k >= 0:
                    depth += toks[k] == tok
                    depth -= toks[k] == opener
                    if depth == 0:
                        break
                    k -= 1
                if k < 0:
                    return False
                start = k
                if start > 0 and toks[start - 1] in {")", "]"}:
                    break  # `for (...) (v).exp()`: the group before is no callee
                continue
            if re.fullmatch(r"[A-Za-z_]\w*", tok) and tok not in _EXPRESSION_WORDS:
                start -= 1
                if start > 0 and toks[start - 1] in {"::", "."}:
                    start -= 1
                    continue
            break
        receiver = toks[start:]
        return bool(receiver) and self._expression(receiver, self.names)
