"""The rule composer's chain state: every size at two levels, full and CPU.

A dim is a Python expression over module-level size names (``height``,
``height - kernel_size + 1``); the state holds the value of every size name
at the task's full sizes and at its CPU sizes (the ``CPU_SIZES`` variant the
CPU backend evaluates), so a shape rule is checked at both levels and a
composed task is valid at both. A dim that code must name and that is not a
plain size becomes a *derived* module-level constant (``out_height = 30``)
whose CPU value is its expression evaluated at the CPU sizes.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Level = Literal["full", "cpu"]
#: Both levels, full first.
LEVELS: tuple[Level, Level] = ("full", "cpu")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=4096)
def _compiled(expr: str) -> Any:
    return compile(expr, "<size expression>", "eval")


def evaluate(expr: str, values: dict[str, Any]) -> Any:
    """The value of a size expression the composer built (names, ints, ``+ - * //``, ``max``, ``min``, tuples).

    >>> evaluate("(h - k + 1) // 2", {"h": 16, "k": 3})
    7
    """
    return eval(_compiled(expr), {"__builtins__": {}, "max": max, "min": min}, values)  # noqa: S307 - composer-built only


def paren(expr: str) -> str:
    """``expr`` wrapped in parentheses unless it is a single name or integer."""
    return expr if _NAME.fullmatch(expr) or expr.isdigit() else f"({expr})"


@dataclass(frozen=True)
class Dim:
    """One dim of the chain's current tensor."""

    expr: str  #: size expression over module-level names (or an integer literal)
    label: str  #: base name for a derived constant holding this dim


@dataclass
class ChainState:
    """Shape, value range, module-level sizes (both levels) and planned steps of a chain."""

    value_range: str
    dims: list[Dim] = field(default_factory=list)
    constants: dict[str, Any] = field(default_factory=dict)  #: name -> full value, in definition order
    cpu_constants: dict[str, Any] = field(default_factory=dict)  #: name -> CPU value
    derived_exprs: dict[str, str] = field(default_factory=dict)  #: expression -> derived constant name
    steps: list[Any] = field(default_factory=list)

    def values(self, level: Level) -> dict[str, Any]:
        """Every size name's value at ``level``."""
        return self.constants if level == "full" else self.cpu_constants

    def value(self, expr: str, level: Level) -> Any:
        """``expr`` evaluated at ``level``."""
        return evaluate(expr, self.values(level))

    def shape(self, level: Level = "full") -> list[int]:
        """The current tensor's shape at ``level``."""
        return [int(self.value(d.expr, level)) for d in self.dims]

    def const(self, base: str, full: Any, cpu: Any) -> str:
        """A drawn size: the name holding (``full``, ``cpu``), reused when both values match an existing one."""
        name, k = base, 2
        while name in self.constants and (self.constants[name], self.cpu_constants[name]) != (full, cpu):
            name, k = f"{base}_{k}", k + 1
        self.constants[name] = full
        self.cpu_constants[name] = cpu
        return name

    def derived(self, base: str, expr: str) -> str:
        """A derived size: a constant holding ``expr`` at both levels (one name per distinct expression)."""
        if expr in self.derived_exprs:
            return self.derived_exprs[expr]
        name, k = base, 2
        while name in self.constants:
            name, k = f"{base}_{k}", k + 1
        self.constants[name] = self.value(expr, "full")
        self.cpu_constants[name] = self.value(expr, "cpu")
        self.derived_exprs[expr] = name
        return name

    def ref(self, i: int) -> str:
        """How code names dim ``i``: its size name or literal, else a new derived constant."""
        dim = self.dims[i]
        if dim.expr.isdigit() or dim.expr in self.constants:
            return dim.expr
        name = self.derived(dim.label, dim.expr)
        self.dims[i] = Dim(name, dim.label)
        return name

    def elements(self, level: Level) -> int:
        """Elements of the current tensor at ``level``."""
        return math.prod(self.shape(level))

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a failed step may have changed."""
        return (list(self.dims), self.value_range, dict(self.constants), dict(self.cpu_constants), dict(self.derived_exprs))

    def restore(self, saved: tuple[Any, ...]) -> None:
        """Undo to a :meth:`snapshot`."""
        self.dims, self.value_range, self.constants, self.cpu_constants, self.derived_exprs = (
            list(saved[0]), saved[1], dict(saved[2]), dict(saved[3]), dict(saved[4]))
