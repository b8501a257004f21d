"""Receivers of the candidate's own types, so ``w.add(v)`` on a ``Welford w`` is not a tensor compute method.

``T1.cpp.aten_method`` refuses tensor compute methods by name (``x.add(y)``, ``x.mean()``), and honest kernels give their
own helper structs methods of the same names: a Welford accumulator's ``add``/``mean``, a running ``max``. Session 41's
honest corpus had ``Welford w; w.add(x[i]);`` refused. A call is allowed when the receiver is a plain name every
declaration of which in the text names one type, a struct or class that the text defines exactly once, without a base
class, and whose body defines (with a body, so the rules read it) a method of that name. Anything else (``auto w``,
``at::Tensor w``, a template type, a struct deriving from ``at::Tensor``, a name bound by a lambda capture or a
structured binding, a pointer receiver) stays refused; the binary layer and the op audit back what this cannot see.
"""

from __future__ import annotations

import re
from functools import cached_property

_NOT_TYPES = frozenset("""return else case throw new delete sizeof typename const volatile static auto register
    struct class using goto co_return co_yield co_await""".split())


class UserTypeScope:
    """What one stripped (or macro-expanded) C++ text defines as its own types and their methods."""

    def __init__(self, code: str) -> None:
        self.code = code

    @cached_property
    def methods(self) -> dict[str, frozenset[str]]:
        """Own types (defined once, no base class) -> the methods their bodies define."""
        heads = list(re.finditer(r"\b(?:struct|class)\s+(\w+)\s*(final\s*)?([:{;])", self.code))
        counts: dict[str, int] = {}
        for m in heads:
            counts[m.group(1)] = counts.get(m.group(1), 0) + (m.group(3) != ";")
        out: dict[str, frozenset[str]] = {}
        for m in heads:
            if m.group(3) != "{" or counts[m.group(1)] != 1:
                continue
            depth, j = 0, m.end() - 1
            while j < len(self.code):
                depth += self.code[j] == "{"
                depth -= self.code[j] == "}"
                if depth == 0:
                    break
                j += 1
            body = self.code[m.end():j]
            out[m.group(1)] = frozenset(re.findall(r"\b(\w+)\s*\([^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?\{", body))
        return out

    def allows(self, line: str, dot: int, method: str) -> bool:
        """Whether ``line[:dot]`` ends with a plain name declared only as an own type that defines ``method``."""
        m = re.search(r"(?<![\w.>:\]\)])([A-Za-z_]\w*)\s*$", line[:dot])
        if not m or line[dot] != ".":
            return False
        name = re.escape(m.group(1))
        if re.search(rf"[\[,]\s*&?\s*{name}\s*=|\bauto\s*&{{0,2}}\s*\[[^\]]*\b{name}\b", self.code):
            return False  # an init-capture or a structured binding declares another one
        types = set(re.findall(rf"([\w:>]+)\s*(?:const\s*)?[&*]*\s+{name}\s*[;=({{,)\[]", self.code))
        types -= _NOT_TYPES
        if len(types) != 1:
            return False
        (kind,) = types
        return method in self.methods.get(kind, frozenset())
